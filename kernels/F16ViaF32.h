//===- F16ViaF32.h - f16 layers through their f32 kernels --------*- C++ -*-===//
//
// A kernel for an f16 node that has only an f32 kernel: it widens the node's
// f16 operands to f32 in its scratch, runs the f32 kernel of a copy of the
// node whose f16 values are f32, and rounds the f16 results back. The values
// a step stores (and so where scaled gradients overflow, which dynamic loss
// scaling reacts to) are those of f16 storage; the arithmetic inside the
// layer is f32, as in f16 library kernels that accumulate in f32. Two extra
// passes over every tensor, plain layout only.
//
// Used where a backend has no f16 layer of its own: on CPUs (oneDNN 2.6 has
// f16 convolutions only with AVX512-FP16), so that an fp16 plan runs under
// --emulate; and on CUDA for batch norms, pooling and reductions, whose own
// kernels are f32 (convolutions there are cuDNN's f16 ones).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"

namespace graphc {

/// Converts `from` into `to` (same shape; f16 <-> f32) on the device's
/// stream (`stream`: KernelContext::stream).
using ConvertTensor = llvm::Error (*)(const TensorView &from, const TensorView &to, void *stream);

/// Registers, for each op, the f16 kernel of `kind` that runs its f32 one.
void registerF16ViaF32(KernelRegistry &r, DeviceKind kind, llvm::ArrayRef<Op> ops,
                       ConvertTensor convert);

} // namespace graphc
