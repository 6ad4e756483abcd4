//===- InferenceFusion.h - Fusions of ops into one library call --*- C++ -*-===//
//
// `graphrun infer` compiles a forward graph that never differentiates, so
// ops that follow one another can run as one library call:
//
//  - fuse-conv-relu: a Conv whose only user is a Relu computes the Relu
//    itself (attribute activation = "relu", a oneDNN post-op applied while
//    the output is still in cache); the Relu goes. A Conv whose result is
//    also read elsewhere, or is a graph output, keeps it.
//  - fuse-conv-add: an Add of a Conv's result and another value of the
//    same type (a residual connection), where the Add is the Conv's only
//    user, becomes that Conv's addend (attribute sum = 1, the addend its last
//    operand; oneDNN's sum post-op adds it before any activation); the Add
//    goes, and a Relu after it fuses as above. Run before fuse-conv-relu.
//  - fuse-pad-pool: a zero Pad of the spatial dimensions whose only user is
//    an AveragePool becomes that pool's own padding, counted in the mean
//    (count_include_pad = 1), which is what averaging the padded zeros
//    computes; the Pad and its copy of the activation go. (PyTorch exports
//    avg_pool2d(padding=1) this way; inception_v3 has nine.)
//
//  - fuse-bn-relu: a batch norm read only by a Relu computes the ReLU
//    itself; the one fusion training graphs get too (FuseBatchNormRelu.h,
//    built on fuseReluInto below).
//
// Other training-graph fusions are not done: autodiff needs each op's own
// result, and the gradient rules know no fused op. Only the CPU Conv kernel
// reads a Conv's attributes; the CUDA kernels refuse a Conv that carries
// them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

/// Fuses Conv -> Add (residual) pairs in every graph of `m`; the number fused.
unsigned fuseConvAdd(Module &m);
/// Fuses Conv -> Relu pairs in every graph of `m`; the number fused.
unsigned fuseConvRelu(Module &m);
/// Makes each Relu whose operand is result 0 of a node with an op in `into`
/// (no fused activation yet), read by that Relu alone and no graph output,
/// that node's activation = "relu"; the Relu goes. The number fused.
unsigned fuseReluInto(Module &m, llvm::ArrayRef<Op> into);
/// Folds zero Pads into the AveragePools they feed; the number folded.
unsigned fusePadIntoAveragePool(Module &m);

} // namespace graphc
