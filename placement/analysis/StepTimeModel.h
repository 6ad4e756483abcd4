//===- StepTimeModel.h - How long a kernel, a copy and a ring take -*- C++ -*-===//
//
// The one model of device and link time that every step analysis asks: the
// cost model (CostModel.h), m-ETF's estimate (placement/ModelParallel.h) and
// the event simulator (StepSimulator.h), so that a node or a copy costs the
// same wherever a step is predicted. Its figures are the cluster's (kind
// peaks, relative speeds, link bandwidths, and a kind's calibration from
// `graphrun calibrate`) and KernelTimes' (docs/placement.md gives their
// sources):
//
//   compute   FLOPs / (kind peak · relative speed)
//   kernel    a calibrated kind: its launch + the work at the measured rate of
//             the op's class (convolutions and matrix products: FLOPs; the
//             rest: bytes), divided by the relative speed; otherwise
//             max(compute, bytes / (memory bandwidth · relative speed)) + the
//             kind's launch; 0 for a node that neither computes nor moves
//             bytes (sources, views)
//   copy      bytes / the link's bandwidth (Cluster::bandwidth: the direct
//             link, else the best two-hop path) + the link's latency
//   ring      an all-reduce over n ranks: each sends 2(n−1)/n of its bytes
//             over the ring's slowest link, and waits 2(n−1) hop latencies
//
// The callers ask it different questions, each the one its figures have
// always answered. The cost model is a lower bound: it asks for compute (a
// device's FLOPs at peak, no launch, no memory-bound time), for copies at
// bandwidth alone (bandwidthSeconds, no latency) and for a ring's volume in
// whole bytes (ringBytes), sent at the slowest link's bandwidth. m-ETF asks
// for kernels and copies; the simulator for kernels, copies and rings
// (ringSeconds), and also for the ring across workers at the network's
// bandwidth and latency.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"
#include "ir/Cost.h"
#include "ir/Op.h"

#include "llvm/ADT/ArrayRef.h"

#include <optional>
#include <string>
#include <utility>

namespace graphc {

/// What a kernel costs beyond its FLOPs, and what a copy costs beyond its
/// bytes (docs/placement.md gives the sources).
struct KernelTimes {
  double gpuMemoryBandwidth = 3.35e12; ///< H100 SXM HBM3, bytes/s
  double cpuMemoryBandwidth = 614e9;   ///< 2 sockets x 8 channels DDR5-4800
  double gpuLaunchSeconds = 5e-6;      ///< a CUDA kernel launch
  double cpuLaunchSeconds = 2e-6;      ///< a host kernel's dispatch
  double linkLatencySeconds = 5e-6;    ///< per transfer and per ring hop
};

/// The slowest link of a ring of devices (rank order, the last back to the
/// first), neighbours on one device left out; 0 when every rank shares one
/// device. `missing`: the first neighbours with no link between them (left
/// out of `slowest`).
struct RingLinks {
  double slowest = 0;
  std::optional<std::pair<std::string, std::string>> missing;
};

/// Holds the cluster by reference: it must outlive the model.
class StepTimeModel {
public:
  explicit StepTimeModel(const Cluster &c, const KernelTimes &t = {}) : c_(c), t_(t) {}

  /// `flops` at the device's peak.
  double computeSeconds(int64_t flops, const ClusterDevice &d) const {
    return (double)flops / c_.peakFlops(d);
  }
  /// One `op` kernel of this cost on `d` (see the file comment).
  double kernelSeconds(Op op, const NodeCost &cost, const ClusterDevice &d) const;

  /// The bandwidth between two devices; none when they are not connected.
  std::optional<double> bandwidth(llvm::StringRef from, llvm::StringRef to) const {
    return c_.bandwidth(from, to);
  }
  /// `bytes` at `bandwidth`, without latency (the cost model's lower bound).
  static double bandwidthSeconds(int64_t bytes, double bandwidth) {
    return (double)bytes / bandwidth;
  }
  /// A copy of `bytes` over a link of `bandwidth`: plus the link's latency.
  double copySeconds(int64_t bytes, double bandwidth) const {
    return bandwidthSeconds(bytes, bandwidth) + t_.linkLatencySeconds;
  }

  /// The links of a ring over these devices, in rank order.
  RingLinks ringLinks(llvm::ArrayRef<std::string> devicesByRank) const;
  /// What each of `ranks` ranks sends (and receives) in a ring all-reduce of
  /// `bytes`: 2(n−1)/n of them, in whole bytes.
  static int64_t ringBytes(int64_t bytes, int64_t ranks) { return 2 * (ranks - 1) * bytes / ranks; }
  /// A ring all-reduce of `bytes` per rank over `ranks` ranks whose slowest
  /// link has `bandwidth`, each hop after the link's latency.
  double ringSeconds(int64_t bytes, double ranks, double bandwidth) const {
    return ringSeconds(bytes, ranks, bandwidth, t_.linkLatencySeconds);
  }
  /// The same with another hop latency (the network between workers).
  static double ringSeconds(int64_t bytes, double ranks, double bandwidth, double hopLatency) {
    return 2.0 * (ranks - 1) / ranks * bytes / bandwidth + 2.0 * (ranks - 1) * hopLatency;
  }

private:
  const Cluster &c_;
  KernelTimes t_;
};

} // namespace graphc
