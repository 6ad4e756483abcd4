//===- Recompute.h - Drop activations and recompute them in the backward pass -*- C++ -*-===//
//
// The `recompute` pass (--recompute auto). A training step keeps every
// activation the backward pass reads alive from the forward pass until its
// gradient is taken, so the step's memory peak is where the forward pass ends.
// When a placed plan does not fit its cluster's memory, the pass drops some of
// those activations and computes them again just before the backward pass
// needs them, trading compute for memory (Chen et al.'s checkpoints; the
// choice is cost-aware, below).
//
// The rewrite (recomputeValues), for a set of dropped values:
//  1. The backward pass is the loss gradient (SoftmaxCrossEntropyGrad,
//     add-loss's) and every node computed from it; the forward pass is the
//     rest. A value is saved when a backward node reads it.
//  2. Each dropped value's producer is copied, and so, recursively, is the
//     producer of every operand the copy needs that is not kept: a kept value
//     is saved and not dropped, or made by a node that is not copied
//     (sources, transfers, collectives, variable updates, another device's
//     nodes). Only backward readers of a dropped value read its copy; the
//     forward pass is unchanged.
//  3. A copy carries `recompute_of = <the original's name>`, the original's
//     tower and devices, and its attributes. It stands in the node order just
//     before the first node that reads it (a backward node or another copy),
//     so the schedule, which keeps the graph's order among ready nodes
//     (placement/analysis/Schedule.h), issues it there and not in the forward
//     pass, and the memory plan sees the original die at its last forward
//     reader.
//  4. Randomness: a recomputed DropoutTrain draws the original's mask (the
//     kernels key their stream by `recompute_of`, kernels/DropoutKey.h).
//     BatchNormTrain: the copy computes the batch statistics again from the
//     same input with the same kernel (the same bits), and only its normalised
//     result is read; the running averages are updated once, from the
//     original's statistics, and the gradient reads the original's saved
//     statistics (per channel: below what the choice drops; a caller that
//     drops them too gets the copy's, the same bits).
//
// The choice (chooseRecompute, RecomputeChoice.cpp), for the devices that do
// not fit: greedy by bytes freed per second of recomputation (each node timed
// by the step-time model), so batch norms, activations and pools, cheap to
// recompute, go first and convolutions after them; a dropped value may need
// at most `depth` contractions (convolutions, products) one after another to
// be recomputed, so the segments that the backward pass recomputes at once
// stay short. Each round drops about what the devices lack, then the memory
// plan that the placement checks use is measured again, and a round that
// does not bring the devices closer is taken back (its values are not tried
// again); the depth grows only when nothing more can be dropped at the
// current one. A plan that fits is left alone; one that cannot be made to fit
// is left alone too, for the placement's refusal to explain.
//
// Left to others: graphs other than "main" (gradient accumulation's micro
// graph) are not rewritten, so a plan with --accumulate that does not fit is
// refused.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

#include "llvm/ADT/DenseSet.h"

namespace graphc {

/// The attribute a recomputed copy carries: its original's name.
inline constexpr llvm::StringLiteral kRecomputeOf = "recompute_of";
/// Whether `n` is a copy the recompute pass made.
inline bool isRecomputed(const Node &n) {
  return n.attrs().has(kRecomputeOf);
}

/// The backward pass of `g` (rule 1): the loss gradients and their
/// descendants.
llvm::DenseSet<const Node *> backwardNodes(const Graph &g);

/// Rules 1 and 2 on one graph, for the rewrite and the choice alike.
class RecomputeAnalysis {
public:
  explicit RecomputeAnalysis(const Graph &g);
  bool isBackward(const Node *n) const { return backward_.contains(n); }
  /// Read by a backward node.
  bool isSaved(const Value *v) const;
  bool isOutput(const Value *v) const { return outputs_.contains(v); }
  /// Whether the copy of `reader` may copy `n` too: a forward node of the
  /// same device that computes from its operands alone.
  bool mayCopy(const Node *n, const Node *reader) const;
  /// Whether `reader`'s copy reads `v` itself rather than a copy of it.
  bool isKept(const Value *v, const Node *reader,
              const llvm::DenseSet<const Value *> &dropped) const;
  /// The nodes whose copies recompute `v` under `dropped`: its producer and,
  /// recursively, the producers of the operands that are not kept; appended
  /// operands first, each once (`seen` carries over between calls).
  void closure(const Value *v, const llvm::DenseSet<const Value *> &dropped,
               llvm::DenseSet<const Node *> &seen, std::vector<const Node *> &out) const;

private:
  llvm::DenseSet<const Node *> backward_;
  llvm::DenseSet<const Value *> outputs_;
};

/// The values that may be dropped: results of forward nodes that may be
/// copied, read by the backward pass, by no other device and not graph
/// outputs; in graph order.
std::vector<Value *> droppableValues(const Graph &g, const RecomputeAnalysis &analysis);

/// Copies the forward nodes that recompute `dropped` (values of forward nodes
/// that backward nodes read) and points their backward readers at the
/// copies (rules 2-4). Returns the copies, in the order they were made
/// (operands first).
std::vector<Node *> recomputeValues(Graph &g, llvm::ArrayRef<Value *> dropped);

/// The choice (file comment) for `m` under `opts`: the names of the values to
/// drop, none when the plan fits or cannot be made to.
llvm::Expected<std::vector<std::string>> chooseRecompute(const Module &m,
                                                         const RecomputeOptions &opts);

/// The pass: chooseRecompute, then recomputeValues on graph main.
llvm::Expected<bool> recompute(Module &m, const RecomputeOptions &opts);

} // namespace graphc
