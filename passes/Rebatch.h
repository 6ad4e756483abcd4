//===- Rebatch.h - A bound batch changed into another ------------*- C++ -*-===//
//
// How a graph's values carry the batch, and what changes when the batch does.
// Two users: `rebatch` (a model exported with a fixed batch, or bound at
// import because it computes with its batch, run at another batch) and
// replicate-towers (each tower's copy of the graph works on its share of the
// batch).
//
// The batch axis of a value is the one axis whose size is a whole multiple k
// of the batch B: k = 1 for images [B, C, H, W], k = heads for attention's
// [B*heads, L, d]. Such a value holds its samples one after another (sample b
// is rows [b*k, (b+1)*k) of that axis), so the same graph at another batch B'
// computes each sample as before and the axis becomes k*B'. What spells the
// batch in attributes (Reshape and Expand shapes, the input_shape of
// ConvGradData and AveragePoolGrad) is rewritten the same way; an Expand
// that broadcasts a batch-less value to the batch at its first axis (ViT's
// class token, expanded to every sample) makes the batch there.
//
// rebatch guarantees, for a module bound to batch B and a batch B' > 0:
//  1. every graph input whose axis 0 is B becomes B' there;
//  2. every node is re-typed in order, its batch-spelling attributes
//     rewritten; each result either keeps its type or changes exactly one
//     axis from k*B to k*B';
//  3. it refuses, in one error naming the node, what would compute another
//     model at B': a Reshape or Expand whose shape does not keep the batch
//     leading, a node whose shapes no longer agree (a constant of the old
//     batch's size), a result whose sizes change otherwise than 2. says, and
//     a node that reads the batch but whose results lose it unless it is a
//     reduction (Slice, Gather, Split or Pad of fixed rows would silently
//     keep the old batch's rows);
//  4. the plan's batch becomes B'. On an error the module is unchanged.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <optional>

namespace graphc {

/// Where a value carries the batch: `axis` (-1: nowhere) holds `multiple`
/// times the batch, `inner` consecutive entries of it per sample (the part
/// of `multiple` below the batch; the rest, multiple / inner, is above it).
/// The batch leads its axis when inner == multiple; sequence-first models
/// flatten [L, N, E] to [L * N, E], where it does not (inner 1).
struct BatchAxis {
  int axis = -1;
  int64_t multiple = 1;
  int64_t inner = 1;
  explicit operator bool() const { return axis >= 0; }
};

/// A batch changing from `from` to `to` samples.
struct BatchChange {
  int64_t from, to;
  int64_t scaled(int64_t size) const { return size / from * to; }
};

/// An Expand of a batch-less value whose shape leads with the batch
/// (`c.from`) on an axis it broadcasts: ViT's class token, expanded to every
/// sample. Its shape's lead becomes `c.to`.
bool expandMakesBatch(const Node &n, BatchChange c);

/// Ops whose attributes hold the batch: the ones rewriteBatchAttrs changes.
bool batchInAttrs(Op op);

/// Rewrites the attributes of `orig` (its copy's `attrs`) that spell the
/// batch its operands carry (`axisOf` says where each of `operands`, the
/// copy's, carries it): Reshape's shape (the batch on the result axis where
/// the dimensions before the operand's batch axis end), Expand's shape,
/// ConvGradData's and AveragePoolGrad's input_shape, GatherGrad's data_shape
/// (from the gradient's batch axis). An error naming the node, ending in
/// `consequence`, when the shape does not keep the batch on one dimension.
llvm::Error rewriteBatchAttrs(const Node &orig, llvm::ArrayRef<Value *> operands,
                              llvm::function_ref<BatchAxis(const Value *)> axisOf, BatchChange c,
                              Attrs &attrs, llvm::StringRef consequence);

/// Where a result typed `before` at c.from carries the batch, typed `after`
/// at c.to: the one axis that went from k*from to k*to (the batch leading
/// it), or no axis when the type is the same; std::nullopt when it changed
/// any other way.
std::optional<BatchAxis> followBatch(const TensorType &before, const TensorType &after,
                                     BatchChange c);

/// followBatch's answer `found` for result `result` of `orig` (read through
/// `operands`, `axisOf` as in rewriteBatchAttrs), with how the batch sits in
/// its axis: a Reshape's from the row-major walk, another op's from an
/// operand whose batch axis holds the same multiple.
BatchAxis batchLayout(const Node &orig, unsigned result, BatchAxis found,
                      llvm::ArrayRef<Value *> operands,
                      llvm::function_ref<BatchAxis(const Value *)> axisOf, BatchChange c);

/// Changes the bound batch of `m` to `batch` (the guarantees above).
llvm::Error rebatch(Module &m, int64_t batch);

} // namespace graphc
