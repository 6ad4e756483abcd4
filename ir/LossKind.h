//===- LossKind.h - What the loss op computes --------------------*- C++ -*-===//
//
// --loss, the loss add-loss builds (passes/AddLoss.h). Its own header, free of
// LLVM, because the CUDA device code switches on it too (kernels/cuda/
// LossDevice.h); parsing and names are in ir/Modes.h.
//
//===----------------------------------------------------------------------===//
#pragma once

namespace graphc {

enum class LossKind : unsigned char {
  CrossEntropy, ///< softmax cross-entropy of logits [B, C] against class labels (the default)
  Nll,          ///< negative log-likelihood: the output is log-probabilities [B, C]
  Mse,          ///< mean squared error of the output [B, ...] against float targets of its shape
};

} // namespace graphc
