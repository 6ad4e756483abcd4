//===- MemoryNeeds.h - What each device of a placed plan holds at its peak -*- C++ -*-===//
//
// A device needs its variables (parameters, optimizer slots and state stored
// there: the cost model's variable bytes, Variable::bytesOn, so only its piece
// of sharded optimizer slots) plus its planned arena: the memory
// plan (MemoryPlan.h) for the very order the executor issues (Schedule.h),
// unassigned nodes on the host. Placement decisions check a plan against its
// cluster's memory_bytes with these figures: --params auto skips a mode that
// does not fit, --strategy model-parallel schedules again with less of an
// overflowing device, and graphc place and graphrun train refuse a plan that
// does not fit.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "placement/analysis/CostModel.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace graphc {

/// Each device's planned arena bytes for graph main, in the executor's issue
/// order (no in-place reuse: the kernels' answers are the executor's).
llvm::Expected<llvm::StringMap<int64_t>> plannedArenaBytes(const Module &placed);

/// What one device of a placed plan holds at its peak, against its memory.
struct MemoryNeed {
  std::string device;
  int64_t variables = 0;   ///< parameters, optimizer slots and state stored there
  int64_t activations = 0; ///< the planned arena for the device
  int64_t capacity = 0;    ///< the cluster's memory_bytes
  DeviceKind kind = DeviceKind::CPU; ///< the cluster's kind of the device
  int64_t total() const { return variables + activations; }
  bool fits() const { return total() <= capacity; }
  /// "gpu:1 needs 1536.0 MiB (1236.0 MiB of variables, 300.0 MiB of
  /// activations) and has 1024.0 MiB".
  std::string text() const;
};

/// Every device of `runnable` (placed, without its kept forward graph) that
/// the cluster describes, in cluster order, with `cost`'s variable bytes.
llvm::Expected<std::vector<MemoryNeed>> memoryNeeds(const Module &runnable, const Cluster &cluster,
                                                    const PlacementCost &cost);
/// "the plan does not fit its cluster's memory: <each device that does not>
/// (...)", or success when every device fits.
llvm::Error checkFits(llvm::ArrayRef<MemoryNeed> needs);
/// memoryNeeds() on the cluster `runnable`'s plan records (meta `cluster`),
/// with its estimated placement cost; none without a cluster.
llvm::Expected<std::vector<MemoryNeed>> memoryNeeds(const Module &runnable);

} // namespace graphc
