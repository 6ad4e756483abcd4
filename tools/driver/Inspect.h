//===- Inspect.h - `graphc inspect` of a placed module ------------*- C++ -*-===//
//
// A placed module's report: the cost model's per-device table (nodes, FLOPs,
// parameter bytes where the parameter mode put them, bytes in and out per
// step, predicted times) with each device's peak activation bytes taken from
// the executor's memory plan for the very order the executor will issue.
//
// A plan for several workers is reported per worker, each as its rank runs
// it (passes/WorkerPart.h: its towers on its own host and GPUs, numbered from
// gpu:0): a table of the workers (task, towers, samples of every batch,
// FLOPs, variable and peak activation bytes, traffic inside the worker and
// between workers), then each worker's per-device table and traffic. Between
// workers is the ring all-reduce of every sum marked `workers` (2(W-1)/W of
// its bytes, sent and as much received, once per worker); the network's
// time is not modelled.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "placement/CostModel.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace graphc {

llvm::Error printPlacedReport(const Module &placed, llvm::raw_ostream &os, bool json);

/// For a module placed on a cluster (`graphc place`, `graphrun train --gpus`
/// or `--cluster`): an error when a device's variables and peak activations
/// exceed its memory, with the figures. Success for anything else.
llvm::Error checkPlanFitsCluster(const Module &compiled);

/// What one device of a placed plan holds at its peak, against its memory.
struct MemoryNeed {
  std::string device;
  int64_t variables = 0;   ///< parameters, optimizer slots and state stored there
  int64_t activations = 0; ///< the executor's planned arena for the device
  int64_t capacity = 0;    ///< the cluster's memory_bytes
  int64_t total() const { return variables + activations; }
  bool fits() const { return total() <= capacity; }
  /// "gpu:1 needs 1.5 GiB (1.2 GiB of variables, 300.0 MiB of activations)
  /// and has 1.0 GiB".
  std::string text() const;
};
/// Every device of `runnable` (placed, without its kept forward graph) that
/// the cluster describes, in cluster order, with `cost`'s variable bytes.
llvm::Expected<std::vector<MemoryNeed>> memoryNeeds(const Module &runnable, const Cluster &cluster,
                                                    const PlacementCost &cost);
/// "the plan does not fit its cluster's memory: <each device that does not>
/// (...)", or success when every device fits.
llvm::Error checkFits(llvm::ArrayRef<MemoryNeed> needs);
/// Each device's need against its memory for a compiled plan with a cluster
/// (meta `cluster`); none without one.
llvm::Expected<std::vector<MemoryNeed>> planMemoryNeeds(const Module &compiled);

} // namespace graphc
