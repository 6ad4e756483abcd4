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
//   5. In plans placed by a memory order (PlanInfo::releaseSent), a value
//      read on other devices is released on its own device at the first node
//      there that comes after every such reader and launches a kernel; that
//      node waits for the readers (a control dependency), so the memory plan
//      may give its bytes to it and later nodes. Without it such a value lives for the whole step (the
//      sender does not wait for the receivers' copies). Every wait points to
//      an earlier global position, so no device waits in a cycle; plans with
//      collectives do not take it (a collective's ranks meet at different
//      positions).
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
  /// an AllGather after its variable's update) and rule 5 (a sent value's
  /// readers before the node it is released at).
  llvm::DenseMap<const Node *, llvm::SmallVector<const Node *, 4>> controlDeps;
  /// Rule 5: the node of its own device at which a value read elsewhere is
  /// released (it lives until just before it).
  llvm::DenseMap<const Value *, const Node *> releasedAt;

  /// Predecessors of `n`: operand producers plus control dependencies.
  llvm::SmallVector<const Node *, 8> predecessors(const Node *n) const;
};

/// `deviceOf` maps a node to the device it runs on (e.g. its assigned device,
/// or "cpu:0" for an unplaced module). Rule 5 applies where the graph's
/// module asks for it (PlanInfo::releaseSent).
llvm::Expected<Schedule> buildSchedule(const Graph &g,
                                       const std::function<std::string(const Node &)> &deviceOf);

/// The threads each CPU device of a run gets out of `cores`. The cores are
/// shared among the CPU devices (of `devices`, by `isCpu`) that compute: at
/// least a tenth of the busiest one's FLOPs in `main`; a host that only feeds
/// and aggregates for towers must not halve a tower's threads.
int cpuDeviceThreads(const Schedule &main, llvm::ArrayRef<std::string> devices,
                     llvm::function_ref<bool(llvm::StringRef)> isCpu, int cores);

} // namespace graphc
