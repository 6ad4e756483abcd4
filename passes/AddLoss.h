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
//  5. A model that ends in Softmax or LogSoftmax over its classes (Keras
//     applications, PyTorch models with a probability head) trains on that
//     op's operand, its logits: the cross-entropy of probabilities barely
//     learns (its loss cannot fall below log(1 + (C-1)/e)), and the
//     cross-entropy of the logits is what NLL on a LogSoftmax computes. The
//     output stays the model's own (argmax, infer and export unchanged);
//     logitsOf() says where the loss reads, for the run plan to say so.
//
// Errors: an unbound batch; no output; an output that is not [B, C]
// floating point; more than two outputs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> addLoss(Module &m, const LossOptions &opts);

/// The logits of a classifier's output [B, C]: the operand of a Softmax or
/// LogSoftmax over its classes that produces it, else the output itself.
Value *logitsOf(Value *output);

} // namespace graphc
