//===- LossScaling.h - Dynamic loss scaling ----------------------*- C++ -*-===//
//
// The `loss-scaling` pass (--loss-scale S; on by default with --precision
// fp16, S = 65536). It runs after aggregate-gradients, on the plan whose
// updates read their final gradients, and guarantees, in every graph:
//
//  1. Variables (kind State, f32 scalars, so checkpoints keep them; names in
//     ir/Module.h): `loss_scale` = S, `loss_scale/good_steps` = 0 and
//     `loss_scale/skipped_steps` = 0, on the devices of the updates'
//     variables (every tower's GPU when mirrored, else the first update's
//     device).
//  2. Every SoftmaxCrossEntropyGrad (main's and the micro-step graph's)
//     reads its loss gradient multiplied by the scale (Mul with a read of
//     `loss_scale` on its tower's replica, or where the scale lives): the
//     backward pass carries gradients S times the loss's, so small ones
//     survive 16-bit storage; large ones may overflow to infinity.
//  3. Each device's Apply* nodes feed one CheckFinite of their gradients (0
//     when all are finite, +inf otherwise). Mirrored: each tower's check feeds
//     its own LossScaleStep on its replica (the all-reduced gradients are the
//     same on every tower, so the towers decide alike). Otherwise one
//     CheckFinite of the devices' checks feeds one LossScaleStep where the
//     scale lives. Every Apply* reads its LossScaleStep's decision as a third
//     operand: a step whose gradients are not all finite updates no
//     parameter, the others divide the gradient by the scale first (see
//     kernels/LossScaleRule.h for how the scale moves).
//  4. Module meta `loss_scale` = S and `loss_scale_interval` = the growth
//     interval.
//
// Running statistics (BatchNorm's moving averages) and the loss output are
// unaffected: they do not carry the scale. Errors: S below 1 or not finite,
// an interval below 1, a plan that already scales, no Apply* or no
// cross-entropy gradient, a variable name already taken; all found before
// the module changes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

/// The scale --precision fp16 starts from when --loss-scale is not given
/// (PyTorch's GradScaler's 2^16).
inline constexpr double kDefaultFp16LossScale = 65536;

llvm::Expected<bool> addLossScaling(Module &m, const LossScaleOptions &opts);

/// --loss-scale as a user writes it: `off`, or an initial scale >= 1
/// (dynamic scaling from there). Returns 0 for off.
llvm::Expected<double> parseLossScale(llvm::StringRef text);

} // namespace graphc
