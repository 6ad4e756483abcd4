//===- AccumulateGradients.h - K micro-batches per update --------*- C++ -*-===//
//
// The `accumulate-gradients` pass (--accumulate K). It runs after
// replicate-towers, split-batch and concat-outputs and before
// aggregate-gradients (so that every join of towers, and everything after it,
// is planned for the update step only), and turns the training step on a
// global batch of B samples into K steps on B samples each that make one
// update, equal to one step on the K·B samples:
//
//  1. Loss scale. Every cross-entropy and its gradient get `scale` divided by
//     K: a micro-batch's loss and gradients are its share of the mean over
//     the update's K·B samples, so their sums over the K micro-batches are
//     that mean.
//  2. Graph "micro", the first K−1 micro-batches: main's towers with their
//     forward and backward passes (same node names, towers and requests), and
//     nothing that joins towers: no tower sums, no updates of parameters or
//     running statistics, no outputs, no learning rate. Each tower adds its
//     part of every gradient and its loss into accumulator variables
//     (VarKind::Accumulator) `tower_<t>/accumulated/<name>` on its own device:
//     Assign(acc, Add(acc, part)), next to the node that computes the part.
//     So a micro-step communicates nothing: no transfer to the parameters'
//     host, no all-reduce, no sum across workers, no parameter-server
//     exchange (BatchNorm `sync` aside: its statistics are all-reduced in
//     every forward pass).
//  3. Graph "main", the last micro-batch and the update: each tower's part
//     becomes Add(acc, part) (between the gradient and its name, so later
//     passes see the same gradient nodes), the tower's sum over the K
//     micro-batches; the tower sums, aggregation, the optimizer and the loss
//     output (the mean over the K·B samples) follow as without accumulation,
//     once per update. Each accumulator is then set to zero (an Assign of
//     zeros, after its read): accumulators are zero at every update boundary,
//     so checkpoints leave them out.
//  4. Running statistics (state Assigns, e.g. BatchNorm moving averages) are
//     updated from every micro-batch's statistics, K times per update, as in
//     PyTorch's gradient accumulation, yet without a sum across towers per
//     micro-step: tower t keeps its own view v + D_t of each such variable v,
//     D_t an accumulator; a micro-step stores in D_t the tower's next value
//     minus v, and the update writes v = Σ_t (B_t/B)·next_t as before and
//     zeroes D_t. For a moving average (linear in v, weights summing to 1) this
//     is exactly K sequential updates from the towers' weighted statistics.
//     Without towers the state Assign runs in both graphs.
//  5. Module meta `accumulate` = K.
//
// The trainer runs "micro" K−1 times and "main" once per update (the
// executor binds both over the same variables and arenas); the step counter
// and the learning rate schedule count updates. K = 1 changes nothing.
//
// Errors: a module that already accumulates; no update or no cross-entropy;
// towers whose data inputs split-batch has not joined yet; an update that
// does not read a sum over the towers; a name an accumulator would take.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

/// The name of the micro-step graph.
inline constexpr llvm::StringLiteral kMicroGraph = "micro";

llvm::Expected<bool> accumulateGradients(Module &m, const AccumulateOptions &opts);

/// --accumulate as a user writes it: a whole number of micro-batches per
/// update, at least 1. The error names the flag.
llvm::Expected<unsigned> parseAccumulateSteps(llvm::StringRef text);

/// The micro-batches per update a compiled module runs (meta `accumulate`;
/// 1 when absent), checked against its graphs: K > 1 needs graph "micro".
llvm::Expected<unsigned> accumulationSteps(const Module &m);

} // namespace graphc
