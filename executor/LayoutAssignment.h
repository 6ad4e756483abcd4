//===- LayoutAssignment.h - Which layout each value is kept in -*- C++ -*-===//
//
// The executor keeps a value in the one non-plain layout of its device's
// kind where its producer and every consumer can take it, so that chains of
// convolutions, batch norms, pools and elementwise ops stay in the layout the
// convolutions compute in and no copy runs between them:
//   - CPU devices: Layout::Blocked (oneDNN's nChw<B>c), or
//     Layout::ChannelsLast for the 4-D values whose dtype LayoutOptions::cpu
//     makes channels-last on this CPU (kernels/ChannelsLast.h: bf16 with
//     AMX), unless LayoutOptions::blocked is off;
//   - GPU devices: Layout::ChannelsLast (NHWC) for the 4-D values whose dtype
//     LayoutOptions::gpu allows (kernels/ChannelsLast.h).
// The contract, for a value v made on a device of kind K with layout L(K):
//  1. v is not empty, not a graph output, made by a kernel that produces it
//     in L (or by a copy from another device of kind K, which carries the
//     bytes as they are), and read only by kernels of its device that accept
//     it in L (or by such copies);
//  2. layout-following kernels (Kernel::layoutFollowsOperands: elementwise
//     ops, concat and split) and same-kind copies tie their operands and
//     results into one group, which takes L only if every member satisfies 1
//     with the same L;
//  3. a group that may take L does unless the kernels with a layout of their
//     own (preferredOperandLayout / preferredResultLayout: convolutions)
//     would compute more of its bytes without a copy in plain than in L;
//     a group no such kernel cares about takes L, since the kernels around it
//     then compute in L too.
// Where a kernel that computes in L meets a plain value it copies the value
// into L itself (a reorder it counts: Kernel::reordersRun), so the copies
// stay at the edges of the groups. The choice depends only on the graph, the
// devices' kinds and the kernels' answers: deterministic, and pure, so that
// tests can assign GPU plans on a machine without a GPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DeviceId.h"
#include "ir/Module.h"
#include "kernels/Kernel.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"

namespace graphc {

/// One node of the bound graphs, as the assignment sees it.
struct LayoutSite {
  const Node *node = nullptr;
  unsigned device = 0;               ///< the device that runs it (equal: the same device)
  DeviceKind kind = DeviceKind::CPU; ///< that device's kind
  /// Its kernel; null where it has none (inputs, variables, constants,
  /// collectives, copies between devices).
  const Kernel *kernel = nullptr;
  /// A copy from another device of the same kind: its result takes its
  /// operand's layout (the bytes move as they are).
  bool copiesAsIs = false;
};

struct LayoutOptions {
  bool blocked = true; ///< CPU devices may keep values out of plain
  CpuLayout cpu = CpuLayout::Auto;
  bool cpuHasAmx = false; ///< the CPU's, for CpuLayout::Auto
  GpuLayout gpu = GpuLayout::Auto;
};

/// The layout of every value that is not plain. `sites` lists every node of
/// the graphs bound, each once.
llvm::DenseMap<const Value *, Layout> assignLayouts(llvm::ArrayRef<LayoutSite> sites,
                                                    const LayoutOptions &options);

} // namespace graphc
