//===- TowerReplication.h - N towers of a single-device graph ----*- C++ -*-===//
//
// The `replicate-towers` pass. It runs on the differentiated training graph
// (after add-optimizer; docs/towers.md says why there) with a bound batch B,
// and guarantees, for N = --towers and the sizes B_t of planBatchSplit:
//
//  1. Towers. Every node but Inputs and variable updates (Assign, Apply*) is
//     copied once per tower t with B_t > 0 as `tower_<t>/<name>`, tower index
//     t, requested device "gpu:<t>" (a node that already requested a device
//     keeps it). Each copy works on B_t samples: batch-sized dimensions and the
//     attributes that spell them (Reshape/Expand shape, ConvGradData and
//     AveragePoolGrad input_shape) are rewritten; every other dimension stays.
//     The originals are removed.
//  2. Shared variables. The module keeps one set of variables; each tower
//     reads them through its own Variable nodes, which request no device:
//     where storage lives is aggregate-gradients' decision.
//  3. Data. Each Input whose first dimension is B becomes one Input
//     `tower_<t>/<name>` [B_t, ...] per non-empty tower, requested on the host
//     (split-batch turns them into one global Input and a SplitBatch). Other
//     inputs (`lr`) are shared by all towers.
//  4. Loss scale. Cross-entropies keep the scale 1/B of the global batch (set
//     explicitly if it was implicit; under --remainder drop it becomes 1/B'),
//     so the towers' losses and gradients add up to the mean over the batch.
//  5. Gradients. A tower's copy of `grad/<v>` loses `grad_of` and carries
//     `tower_grad_of = "<v>"`; `grad/<v>` becomes AddN of the towers'
//     gradients (operand t from tower t; an empty tower gives a zero
//     Constant), untowered, keeping `grad_of`, and the update reads it.
//  6. State updates (Assign, e.g. BatchNorm moving averages): tower t's value
//     is weighted by B_t/B, the weighted values are summed by an AddN
//     `<assign>/sum` (operand t from tower t; zeros from an empty tower) that
//     the Assign writes: the moving averages are the mean over towers weighted
//     by real sample counts, never one tower's. The moving variance's
//     unbiasing weight n/(n-1) is rewritten for the count the statistics come
//     from (tower t's under local BatchNorm, the global one under sync).
//  7. BatchNorm modes: `local` keeps per-tower statistics; `sync` rewrites
//     every tower's BatchNormTrain and BatchNormTrainGrad into the
//     cross-tower form (SyncBatchNorm.h); `frozen` has nothing to do (the
//     training-mode pass kept the inference form).
//  8. Randomness. Node names keep `tower_<t>/` + the original name, so the
//     DropoutTrain kernel keys its stream by (run seed, name without the
//     prefix, tower, step): each tower draws its own mask, reproducibly.
//  9. Order. The graph order is the single-device order lifted to towers:
//     node after node, the copies of one node for towers 0..N-1 are adjacent
//     (tower sums and updates come last). The executor issues each device's
//     nodes in graph order and collectives synchronize devices without an
//     edge in the graph, so this is what keeps them from deadlocking: every
//     rank of a collective comes after everything any rank needs and before
//     anything that needs a rank's result, on every device, the host included.
// 10. Outputs. The graph returns each non-empty tower's outputs, tower after
//     tower (concat-outputs joins them). Module meta: "towers" = N,
//     "tower_batches" = [B_0, ...], "batch" = the global batch.
//
// --towers 0 asks for no towers: the pass (and split-batch, concat-outputs and
// aggregate-gradients after it) leaves the single-device graph alone; one
// tower (--towers 1) is a tower like any other, on gpu:0.
//
// Errors: an unbound batch; a module that already has towers; the remainder
// policy's errors (planBatchSplit); a node whose batch cannot be split (a
// Reshape that folds the batch into another dimension, a forward node that
// reduces over the batch, local BatchNorm with fewer than two values per
// channel in a tower). Aggregation across devices is left to
// aggregate-gradients; the batch split and output join to split-batch and
// concat-outputs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> replicateTowers(Module &m, const TowerOptions &opts);

/// "tower_<t>/".
std::string towerPrefix(int tower);
/// The device a tower requests: gpu:<t>.
DeviceId towerDevice(int tower);
/// `name` without a leading "tower_<t>/"; `tower` (if given) gets t, or -1.
llvm::StringRef stripTowerPrefix(llvm::StringRef name, int *tower = nullptr);
/// The towers' batch sizes recorded by replicate-towers (meta
/// "tower_batches"); an error naming `pass` when the module has no towers.
llvm::Expected<std::vector<int64_t>> towerBatches(const Module &m, llvm::StringRef pass);

} // namespace graphc
