//===- AddLoss.h - Softmax cross-entropy on the model's logits ---*- C++ -*-===//
//
// The `add-loss` pass. Needs a bound batch B (bind-batch). Guarantees, in
// graph "main" whose output 0 is the logits [B, C]:
//
//  1. An Input `labels` : i64[B] (an existing one of that type is reused).
//  2. `loss/cross_entropy` = SoftmaxCrossEntropy(logits, labels) {scale = 1/B},
//     the mean over the global batch; later passes that split the batch keep
//     the 1/B of the global batch, so tower gradients add up to the mean.
//  3. A second output (inception_v3's auxiliary logits [B, C']) adds
//     `loss/aux_cross_entropy` {scale = w/B} with w = --aux-loss-weight (0.4,
//     as torchvision trains), summed into `loss/total`.
//  4. Graph outputs: the loss first, then the original outputs (the logits
//     stay for accuracy metrics).
//
// Errors: an unbound batch; no output; an output that is not [B, C]
// floating point; more than two outputs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> addLoss(Module &m, const LossOptions &opts);

} // namespace graphc
