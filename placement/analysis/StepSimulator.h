//===- StepSimulator.h - One training step of a placed plan, event by event -*- C++ -*-===//
//
// simulateStep() plays one step of a placed module over its cluster in the
// order the executor issues it (Schedule.h), where the cost model
// (CostModel.h) only adds up each device's load. Its times are the step-time
// model's (StepTimeModel.h), as m-ETF's and the cost model's are:
//
//   streams     each device runs its kernels on one compute stream, in the
//               schedule's order, and its Transfers and AllReduces on one
//               communication stream, also in that order (copies and
//               collectives overlap compute, as the executor's streams do);
//   kernels     kernelSeconds: max(FLOPs / peak, bytes / memory bandwidth)
//               + a launch cost (or the kind's calibration), from ir/Cost.h
//               at the plan's batch; views and sources cost nothing;
//   transfers   copySeconds: bytes / the link's bandwidth + its latency, on
//               the receiving device's communication stream;
//   all-reduce  a ring over the group's devices: every rank starts when the
//               last one is ready, and takes ringSeconds: 2(n-1)/n of its
//               bytes over the ring's slowest link plus 2(n-1) latencies;
//   step        when the last node finishes.
//
// A node starts when its operands' producers and control predecessors (a
// variable's readers before its writer) have finished and its stream is
// free. The critical path walks back from the last node through whatever
// held each node back: a producer, the stream's previous node, or a rank of
// its collective. Deterministic: the result does not depend on the order
// ready nodes are processed in.
//
// Devices calibrated as emulated on the host's cores share them as the
// executor's core budget does (docs/placement.md). The figures are a model,
// not a measurement: no contention between kernels, no caches, bandwidth
// reached at every size. graphc simulate prints them (tools/driver/Simulate.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"
#include "ir/Module.h"
#include "placement/analysis/StepTimeModel.h"

#include "llvm/Support/Error.h"

namespace graphc {

struct SimOptions {
  KernelTimes times;
  int64_t batch = 0; ///< 0: the module's bound batch (else 1)
  /// The plan is one worker's of this many alike: every all-reduce also
  /// crosses the workers, hierarchically (after the ring inside the worker,
  /// each GPU's shard goes round a ring of the workers, at the worker's
  /// network bandwidth): + 2(W-1)/W of the bytes / networkBandwidth +
  /// 2(W-1) network latencies.
  unsigned workers = 1;
  double networkBandwidth = 400e9; ///< bytes/s per worker: DGX H100, 8 x 400 Gb/s
  double networkLatencySeconds = 5e-6;
  /// The graph played: main (a step, or an update with --accumulate), or
  /// an accumulating plan's micro-step graph.
  std::string graph = "main";
};

struct SimDevice {
  std::string device;
  int64_t kernels = 0, copies = 0; ///< nodes on its compute / comm stream
  double computeSeconds = 0;       ///< busy time of the compute stream
  double commSeconds = 0;          ///< busy time of the communication stream
  double finishSeconds = 0;        ///< its last node's end
  double idleSeconds(double step) const { return step - computeSeconds; }
};

struct SimStep {
  const Node *node = nullptr;
  std::string device;
  double start = 0, end = 0;
  /// compute, transfer or all-reduce
  llvm::StringRef kind;
};

struct SimResult {
  double stepSeconds = 0;
  std::vector<SimDevice> devices;    ///< every device that runs a node, sorted
  std::vector<SimStep> criticalPath; ///< first node to last
  std::vector<SimStep> timeline;     ///< every node with a cost, in the order they finish
};

/// Plays graph main (or opts.graph; a compiled module's kept forward graph
/// is not read). The result points at `runnable`'s nodes. Errors: a node without a
/// device in the cluster, a collective whose ranks wait on each other in an
/// order no stream can issue.
llvm::Expected<SimResult> simulateStep(const Module &runnable, const Cluster &cluster,
                                       const SimOptions &opts = {});

} // namespace graphc
