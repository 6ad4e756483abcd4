//===- BatchSplit.h - Cutting the global batch into towers -------*- C++ -*-===//
//
// The towers' batch sizes for a global batch, under --remainder and --split:
// replicate-towers records them, split-batch cuts the batch by them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/CompileOptions.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

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

} // namespace graphc
