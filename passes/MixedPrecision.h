//===- MixedPrecision.h - 16-bit compute, f32 master weights ----*- C++ -*-===//
//
// The `mixed-precision` pass (--precision; nothing to do for fp32). It runs
// on the forward graph after add-loss and before autodiff, so the backward
// pass inherits its types: the gradient of a bf16 value is bf16 and the
// gradient of a Cast is the Cast back. Guarantees, in graph "main", for
// --precision bf16:
//
//  1. Every Conv computes in bf16: its input is read through Cast
//     {to = bf16} unless it is bf16 already; its weights and bias stay f32
//     (the kernel converts them: oneDNN as it reorders them into its own
//     format, cuDNN's kernel into scratch), so autodiff's filter gradient is
//     f32 (ConvGradFilter {to = f32}, summed in f32 by oneDNN, never rounded
//     to bf16; rounded once on GPUs, where cuDNN writes it in bf16) and the
//     optimizer updates f32 master weights. The plan is the same whatever
//     devices run it.
//  2. BatchNormTrain, Relu, MaxPool, AveragePool, GlobalAveragePool,
//     DropoutTrain, and Add and Concat whose operands are all bf16, compute in
//     bf16 when their data operand is bf16 (a value some earlier bf16 node
//     made). BatchNormTrain's scale, bias and statistics stay f32.
//  3. Every other node reads f32: a bf16 operand is read through Cast
//     {to = f32}. So matrix products, the inference form of BatchNorm
//     (--bn frozen), the loss and graph outputs stay f32.
//  4. One Cast per value and dtype, named `<value>/to_bf16` or `/to_f32`,
//     placed after the value's producer; module meta "precision" = "bf16"
//     (or "fp16").
//     A graph with no convolution is left as it is, without that meta.
//
// --precision fp16 is the same with f16 for bf16, but for one difference:
// a Conv reads its weights and bias through Cast {to = f16} too (cuDNN's f16
// convolutions take one type), so its filter gradient is f16, cast back to
// f32 by the gradient of that Cast; the optimizer still updates f32 master
// weights. fp16's narrow range needs loss scaling (passes/LossScaling.h,
// which the tools turn on with it).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> applyMixedPrecision(Module &m, const PrecisionOptions &opts);

} // namespace graphc
