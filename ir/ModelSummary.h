//===- ModelSummary.h - Module statistics for `graphc inspect` ---*- C++ -*-===//
//
// summarize() adds up a module: its variables by kind (trainable parameters,
// non-trainable state such as BatchNorm running statistics, optimizer slots,
// gradient accumulators),
// the cost of every node (Cost.h), the bytes of all activations, the peak live
// activation bytes of a straightforward schedule, and a per-op table.
//
//  - Activations are the results of every node except Variable reads, each its
//    own buffer (no aliasing of views, no in-place reuse).
//  - Peak live bytes: nodes run in graph order; a result is allocated when its
//    node runs and freed after its last reader, graph outputs are never freed,
//    unread results die at once. Operands stay live while their reader runs.
//    With several graphs, the largest graph's peak.
//  - The per-op table is sorted by MACs, then FLOPs, then count (all
//    descending), then op name, so equal modules print equal tables.
//  - `batch` is what the symbolic batch N counts as (<= 0: 1); a module whose
//    batch is bound is summarized at its bound batch, whatever `batch` says.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cost.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace graphc {

struct VariableStats {
  int64_t variables = 0;
  int64_t elements = 0;
  int64_t bytes = 0;
};

struct OpSummary {
  Op op;
  int64_t count = 0;
  NodeCost cost;
};

struct ModelSummary {
  std::string name;
  int64_t batch = 1;
  bool batchBound = false; ///< the module's shapes are bound (else N counts as `batch`)
  int64_t nodes = 0;
  VariableStats params, state, slots, accumulators;
  NodeCost total;
  int64_t activationBytes = 0;
  int64_t peakLiveBytes = 0;
  int64_t longestSum = 1; ///< of a training step (Cost.h), over every graph
  std::vector<OpSummary> ops;
};

ModelSummary summarize(const Module &m, int64_t batch = 0);

/// Success when every value of `m`, with N counted as `batch`, fits a tensor
/// (kMaxTensorBytes); the error names the first that does not, so counts at a
/// batch no machine holds are refused rather than wrapped.
llvm::Error checkBatchFits(const Module &m, int64_t batch);

/// Peak live activation bytes of `g` run in order (see the header comment).
int64_t peakLiveBytes(const Graph &g, int64_t batch);

/// A human-readable report: totals, then the per-op table.
void printSummary(const Module &m, int64_t batch, llvm::raw_ostream &os);
/// The same numbers as one JSON object (exact integers, shares in [0, 1]).
void printSummaryJson(const Module &m, int64_t batch, llvm::raw_ostream &os);

} // namespace graphc
