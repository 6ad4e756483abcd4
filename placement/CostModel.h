//===- CostModel.h - Per-device load and predicted step time ----*- C++ -*-===//
//
// estimatePlacementCost() reads a placed module (every node assigned) and a
// cluster and predicts one training step, per device:
//
//   compute    = FLOPs of its nodes (ir/Cost.h) / (kind peak · relative speed)
//   traffic    = every value read on another device than it was made on, once
//                per destination (what insert-transfers turns into Transfers,
//                counted the same before or after that pass), plus ring
//                all-reduce: each rank sends and receives 2·(n−1)/n of its
//                operands' bytes, to and from the next and previous rank
//   comm time  = for each direction, the sum over its transfers of
//                bytes / link bandwidth (the link between the two devices, or
//                the best two-hop path); a device's comm time is the larger
//                direction (links are full duplex, transfers through one
//                device's side are serial); an all-reduce runs at the slowest
//                link of its ring
//   step       = with overlap (the default): max(compute, comm), since copies
//                and collectives run on their own streams; without overlap:
//                compute + comm
//
// and the whole step as the slowest device. With gradient accumulation
// (meta `accumulate` = K) a step is an update: graph main once and every
// other graph (the micro-steps) K − 1 times. It is a lower bound: FLOPs at
// peak, no kernel launch or memory-bound time, no dependency stalls.
// Variable bytes count every variable whose storage is on the device
// (parameters, optimizer slots, state such as BN statistics).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"
#include "ir/Cost.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <optional>

namespace graphc {

struct CostOptions {
  bool overlapCommunication = true;
  int64_t batch = 0; ///< sizes at this batch; 0: the module's bound batch (else 1)
};

struct DeviceCost {
  std::string device;
  int64_t nodes = 0;
  int64_t flops = 0;
  int64_t variableBytes = 0;
  int64_t bytesIn = 0, bytesOut = 0; ///< per step: transfers and all-reduce
  int64_t allReduceBytes = 0;        ///< of bytesOut (and of bytesIn): ring all-reduce
  double computeSeconds = 0, commSeconds = 0, stepSeconds = 0;
};

struct DeviceTraffic {
  std::string from, to;
  int64_t bytes = 0;
  double seconds = 0; ///< bytes / bandwidth between the two
};

struct PlacementCost {
  std::vector<DeviceCost> devices;    ///< every cluster device, cluster order
  std::vector<DeviceTraffic> traffic; ///< pairs that exchange bytes, cluster order
  bool overlap = true;
  double stepSeconds = 0;
  std::string slowestDevice;
  int64_t totalTrafficBytes() const;
  const DeviceCost *find(llvm::StringRef device) const;
};

/// What a kernel costs beyond its FLOPs, and what a copy costs beyond its
/// bytes (docs/placement.md gives the sources): for graphc simulate and the
/// model-parallel scheduler.
struct KernelTimes {
  double gpuMemoryBandwidth = 3.35e12; ///< H100 SXM HBM3, bytes/s
  double cpuMemoryBandwidth = 614e9;   ///< 2 sockets x 8 channels DDR5-4800
  double gpuLaunchSeconds = 5e-6;      ///< a CUDA kernel launch
  double cpuLaunchSeconds = 2e-6;      ///< a host kernel's dispatch
  double linkLatencySeconds = 5e-6;    ///< per transfer and per ring hop
};

/// The time of an `op` kernel of this cost on device `d`, 0 for a node that
/// neither computes nor moves bytes (sources, views). With the kind's
/// calibration (graphrun calibrate): its launch time plus the work at the
/// measured rate of the op's class (convolutions and matrix products: FLOPs;
/// the rest: bytes), divided by the device's relative speed. Without:
/// max(FLOPs / peak, bytes / memory bandwidth) + the launch of `t`.
double kernelSeconds(Op op, const NodeCost &cost, const Cluster &c, const ClusterDevice &d,
                     const KernelTimes &t);

/// Errors: a node without an assigned device or with one outside the
/// cluster; two devices that exchange bytes with no link between them.
llvm::Expected<PlacementCost> estimatePlacementCost(const Module &m, const Cluster &c,
                                                    CostOptions opts = {});

/// Peak activation bytes of a device, from the executor's memory plan (the
/// tools pass it in; placement does not depend on the executor). nullopt or
/// no callback: not known, printed as "-".
using PeakActivationBytes = std::function<std::optional<int64_t>(llvm::StringRef device)>;

/// `graphc inspect`: a per-device table (nodes, GFLOP, variable and peak
/// activation MiB, MiB in and out per step, compute, comm and step ms), the
/// traffic between each pair of devices per step, and the predicted step
/// time with its bottleneck. Devices whose variables and activations exceed
/// their memory are flagged.
void printCostReport(const PlacementCost &cost, const Cluster &c, llvm::raw_ostream &os,
                     const PeakActivationBytes &peak = nullptr);
/// Prints rows of cells in columns: the first `leftColumns` aligned left
/// (names), the others right (numbers); rows[0] is the header.
void printTable(llvm::ArrayRef<std::vector<std::string>> rows, llvm::raw_ostream &os,
                unsigned leftColumns = 1);
/// The same figures as JSON (bytes, FLOPs and seconds unscaled).
llvm::json::Value costReportJson(const PlacementCost &cost, const Cluster &c,
                                 const PeakActivationBytes &peak = nullptr);

} // namespace graphc
