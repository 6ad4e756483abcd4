//===- FuseBatchNormRelu.h - A batch norm and the ReLU after it --*- C++ -*-===//
//
// fuse-bn-relu, in the training pipeline after autodiff (and in graphrun
// infer's), in two halves:
//
//  1. Forward, every plan: a BatchNorm or BatchNormTrain whose result 0 only
//     a Relu reads, and that is no graph output, computes the ReLU itself
//     (activation = "relu"); the Relu's users read the batch norm's result 0
//     and the Relu goes. The batch norm keeps its name, tower and devices;
//     the Relu's node and value names go with it (the fused value is named
//     by the batch norm's result). The backward pass reads the ReLU's output
//     (ReluGrad's mask) and the batch norm's input and statistics, never the
//     value before the ReLU, so nothing it needs disappears.
//  2. Backward, with BatchNormReluOptions::gradients (the strategies set it
//     for plans whose compute devices are GPUs): a ReluGrad(y, dy) whose y is
//     a fused BatchNormTrain's result 0, read only by the BatchNormTrainGrad
//     of that same batch norm (its x, mean and var) as its dy, and no graph
//     output, becomes that gradient's mask: the gradient takes y as a sixth
//     operand and activation = "relu", computing the gradient of
//     (y > 0 ? dy : 0) as the two nodes did; the ReluGrad goes. The gradient
//     node is rewritten in place, so it keeps its name, tower and devices.
//     On a GPU the pair is one pass over the activation instead of two
//     (docs/cuda.md); CPU plans keep the ReluGrad (oneDNN's kernels are
//     fast apart), so their modules and numbers stay as they were. The CPU
//     kernel of the fused gradient (emulated GPUs) masks dy into scratch and
//     runs the unfused gradient: the same bits, given dy in the same layout.
//
// What does not match is left as it is: a batch norm whose result is read
// twice or is an output keeps its Relu (and so its ReluGrad); a ReluGrad
// read elsewhere too keeps its node. Frozen batch norms (BatchNorm, whose
// gradient autodiff writes out of elementwise ops) and --bn sync (whose
// replicate-towers expands BatchNormTrainGrad into reductions and
// all-reduces) fuse their forward half only. In 16-bit plans the batch norm,
// the Relu and their gradients are all 16-bit (mixed-precision puts no Cast
// between them), so they fuse as in f32.
//
// inception_v3 (94 batch norms, each followed by a ReLU): all 94 fuse in both
// halves on GPUs in fp32, fp16 and bf16.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

/// Fuses BatchNorm / BatchNormTrain -> Relu pairs in every graph (half 1);
/// the number fused.
unsigned fuseBatchNormRelu(Module &m);
/// Fuses each fused BatchNormTrain's ReluGrad into its BatchNormTrainGrad
/// in every graph (half 2); the number fused.
unsigned fuseBatchNormReluGradients(Module &m);

/// The pass: half 1, then half 2 when `o.gradients`; whether anything fused.
llvm::Expected<bool> fuseBatchNormReluPass(Module &m, const BatchNormReluOptions &o);

} // namespace graphc
