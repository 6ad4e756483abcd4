//===- Cost.h - Arithmetic and memory traffic of one node --------*- C++ -*-===//
//
// nodeCost() estimates what running one node costs, for `graphc inspect`, the
// placer's cost model and the docs' tables. Every op in Ops.def has a rule.
//
//  - macs: multiply-accumulates of contractions only (Conv, Gemm, MatMul and
//    their gradients), the unit papers and torchvision quote ("5.71 GFLOPS"
//    for Inception v3 is 5.71 G MACs). Conv backward-data and backward-filter
//    each cost as many MACs as the forward conv.
//  - flops: every floating-point operation: 2 per MAC plus the elementwise
//    work of every op, with a fixed per-element count per op (documented next
//    to each rule in Cost.cpp; transcendental functions count as one).
//  - bytesRead / bytesWritten: the tensors a kernel touches once each:
//    operands and results, plus, for variable updates, the variable and its
//    optimizer slots (read and written). Views (Reshape, Flatten, Squeeze,
//    Unsqueeze, Identity) and sources (Input, Variable, Constant) move nothing.
//
// Sizes are taken at `batch`: the batch symbol N counts as `batch`, in result
// types and in shape attributes (input_shape, filter_shape) alike.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

namespace graphc {

struct NodeCost {
  int64_t macs = 0;
  int64_t flops = 0;
  int64_t bytesRead = 0;
  int64_t bytesWritten = 0;

  NodeCost &operator+=(const NodeCost &o) {
    macs += o.macs;
    flops += o.flops;
    bytesRead += o.bytesRead;
    bytesWritten += o.bytesWritten;
    return *this;
  }
  bool operator==(const NodeCost &o) const = default;
};

/// The cost of `n` with the batch symbol taken as `batch`. The node's types
/// must be inferred (a verified module).
NodeCost nodeCost(const Node &n, int64_t batch = 1);

/// The terms one result element of `n` sums (1 for ops that sum nothing): a
/// contraction's length (MACs per result element), a reduction's or batch
/// statistic's count, an average pool's window, a softmax's axis, AddN's
/// operands, AllReduce's ranks.
int64_t sumLength(const Node &n, int64_t batch = 1);

/// The bytes whose ring all-reduce moves what collective `n` moves: an
/// AllReduce's operands; half of that for a ReduceScatter (the ring's first
/// phase) and for an AllGather of its variable (the second); 0 otherwise.
int64_t collectiveRingBytes(const Node &n, int64_t batch = 1);

/// K, the number of terms of the longest sum a training step of `g` takes
/// (a forward graph counts its gradients' sums too): contraction lengths
/// (a convolution's window times its input channels per group, and its data
/// gradient's window times output channels; a product's inner dimension, and
/// its gradients' rows and columns), per-channel sums over N·H·W of 4-D values
/// (batch statistics, bias and filter gradients), reductions, and the operands
/// of AddN and AllReduce. Float32 rounding bounds the error of such a sum by
/// about K·u of its terms' magnitude (u = 2^-24, Higham's γ_K): how far two runs
/// that group the sums otherwise (towers, workers, vector widths, Winograd)
/// may drift apart per step.
int64_t longestSum(const Graph &g, int64_t batch = 1);

} // namespace graphc
