//===- Schedule.h - Issue order per device -----------------------*- C++ -*-===//
//
// The executor issues each device's nodes in one fixed order (a stream). This
// file computes that order for every device from a graph whose nodes carry an
// assigned device, guaranteeing:
//   1. Every node comes after its operands' producers (topological).
//   2. A node that writes a variable (Assign, Apply*) comes after every node
//      that reads the variable in the same step, directly or through a view
//      (Reshape and friends alias their operand), on any device. Reads see the
//      value at the start of the step. A collective that writes a variable
//      (AllGather, sharded optimizer state) also comes after the writers of
//      that variable before it in the graph on its device.
//   3. Among ready nodes the graph's own order wins (stable, deterministic),
//      so forward and backward interleave as the passes built them.
//   4. A device's optimizer updates (Apply*) of one op that nothing waits
//      for are issued together, where the last of them would be, so the
//      executor can fuse them into one multi-tensor launch
//      (ExecutorOptions::fuseUpdates).
// Cross-device dependencies are listed so the executor can wait on them; the
// memory plan (MemoryPlan.h) is computed for exactly this order.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <functional>

namespace graphc {

struct Schedule {
  std::vector<std::string> devices;                ///< sorted
  std::vector<std::vector<const Node *>> order;    ///< per device, issue order
  llvm::DenseMap<const Node *, unsigned> deviceOf; ///< index into devices
  llvm::DenseMap<const Node *, unsigned> position; ///< global issue position
  /// Extra predecessors from rule 2 (a variable's readers before its writer,
  /// an AllGather after its variable's update).
  llvm::DenseMap<const Node *, llvm::SmallVector<const Node *, 4>> controlDeps;

  /// Predecessors of `n`: operand producers plus control dependencies.
  llvm::SmallVector<const Node *, 8> predecessors(const Node *n) const;
};

/// `deviceOf` maps a node to the device it runs on (e.g. its assigned device,
/// or "cpu:0" for an unplaced module).
llvm::Expected<Schedule> buildSchedule(const Graph &g,
                                       const std::function<std::string(const Node &)> &deviceOf);

/// The threads each CPU device of a run gets out of `cores`. The cores are
/// shared among the CPU devices (of `devices`, by `isCpu`) that compute: at
/// least a tenth of the busiest one's FLOPs in `main`; a host that only feeds
/// and aggregates for towers must not halve a tower's threads.
int cpuDeviceThreads(const Schedule &main, llvm::ArrayRef<std::string> devices,
                     llvm::function_ref<bool(llvm::StringRef)> isCpu, int cores);

} // namespace graphc
