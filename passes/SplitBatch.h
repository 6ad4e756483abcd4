//===- SplitBatch.h - Splitting the global batch, joining outputs -*- C++ -*-===//
//
// The two passes that connect the towers to the host (how the global batch is
// cut into towers: passes/BatchSplit.h):
//
// `split-batch` guarantees, after replicate-towers:
//  1. Every per-tower data input `tower_<t>/<name>` (an Input with a tower) is
//     replaced by one global Input `<name>` of the global batch and a
//     SplitBatch `<name>/split` {sizes = the towers' batch sizes, zeros for
//     empty towers}, both requested on the host "cpu:0" where the data
//     arrives; tower t reads slice t, so tower t holds samples
//     [B_0 + ... + B_{t-1}, ... + B_t) in batch order.
//  2. The new nodes come first in the graph, before every tower.
//
// `concat-outputs` guarantees, after replicate-towers:
//  1. Graph outputs that come from towers (`tower_<t>/<name>`, one per
//     non-empty tower) are joined on the host into one output `<name>`:
//     scalars (the loss, already scaled by 1/B of the global batch) are summed
//     with AddN, everything else is concatenated along the batch with
//     ConcatBatch in tower order, which is batch order. An output that is not
//     a scalar and whose first dimension is not its tower's batch is an error.
//  2. Outputs that belong to no tower are kept as they are; the order of the
//     outputs is the order of their first appearance.
//
// Both passes change nothing in a module without towers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> splitBatch(Module &m);
llvm::Expected<bool> concatOutputs(Module &m);

} // namespace graphc
