//===- SplitBatch.h - Splitting the global batch, joining outputs -*- C++ -*-===//
//
// How the global batch is cut into towers (planBatchSplit, shared with
// replicate-towers), and the two passes that connect the towers to the host:
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

#include "llvm/ADT/SmallVector.h"

namespace graphc {

/// The towers' batch sizes for a bound global batch under the options'
/// remainder policy and split.
struct BatchSplit {
  llvm::SmallVector<int64_t, 8> sizes; ///< one per tower, in tower order; may hold zeros
  int64_t global = 0;                  ///< their sum: the batch, or less under `drop`
};

/// The remainder policies:
///   error   every tower gets exactly its share (B/N, or B·w_t/Σw with
///           weights); anything else is an error naming the batch, the towers
///           and the policies that exist (with what each would do).
///   drop    the global batch shrinks to the largest size that splits
///           exactly (a multiple of N without weights); zero is an error.
///   uneven  shares as even as possible: the first B mod N towers get one
///           sample more; with weights, the largest-remainder apportionment
///           (ties to the lower tower). Towers may get nothing.
/// Weights (--split 4,4,2) are one non-negative number per tower; --split
/// auto reaches here as the weights the tools derived from the cluster
/// (Cluster::towerSpeeds), and unresolved it is an error.
llvm::Expected<BatchSplit> planBatchSplit(int64_t batch, const TowerOptions &opts);

llvm::Expected<bool> splitBatch(Module &m);
llvm::Expected<bool> concatOutputs(Module &m);

} // namespace graphc
