//===- MemoryFit.h - Does a placed plan fit its devices' memory --*- C++ -*-===//
//
// Memory is a constraint, not a cost: a device holds its variables
// (parameters, optimizer slots and state where the parameter mode stores
// them: the cost model's variable bytes) and, at its peak, the arena the
// executor's memory plan lays out for the order the executor will issue.
// The model-parallel strategy schedules again until its plan fits, params
// auto drops the modes that do not, and graphc place writes nothing that
// does not.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "placement/CostModel.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace graphc {

/// Each device's planned arena of a placed module, for the order the
/// executor will issue.
llvm::Expected<llvm::StringMap<int64_t>> peakActivations(const Module &placed);

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
/// For a module placed on a cluster (`graphc place`, `graphrun train --gpus`
/// or `--cluster`): an error when a device's variables and peak activations
/// exceed its memory, with the figures. Success for anything else.
llvm::Error checkPlanFitsCluster(const Module &compiled);

} // namespace graphc
