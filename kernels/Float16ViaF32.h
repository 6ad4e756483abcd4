//===- Float16ViaF32.h - 16-bit float layers through their f32 kernels -*- C++ -*-===//
//
// A kernel for an f16 or bf16 node that has only an f32 kernel: it widens
// the node's 16-bit operands to f32 in its scratch, runs the f32 kernel of a
// copy of the node whose 16-bit values are f32, and rounds the 16-bit results
// back. The values a step stores (and so where scaled gradients overflow,
// which dynamic loss scaling reacts to) are those of 16-bit storage; the
// arithmetic inside the layer is f32, as in 16-bit library kernels that
// accumulate in f32. Two extra passes over every 16-bit tensor. Operands of
// other types (a batch norm's f32 scale and statistics) pass as they are.
//
// Layouts: plain, unless the backend's conversion can also move a 4-D
// tensor between plain and one other layout (`movable`: CUDA's
// channels-last). Then every 4-D 16-bit operand and result may come in that
// layout: the f32 kernel gets it as it is where it takes that layout (pools),
// and plain otherwise (batch norms), the widening or rounding pass
// transposing on the way, so the layout change costs no pass of its own.
//
// Used where a backend has no 16-bit layer of its own: on CPUs for f16
// (oneDNN 2.6 has f16 convolutions only with AVX512-FP16), so that an fp16
// plan runs under --emulate; and on CUDA for the batch norms, pooling and
// reductions of f16 and bf16, whose own kernels are f32 (convolutions there
// are cuDNN's 16-bit ones).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"
#include "kernels/LayoutAnswers.h"

namespace graphc {

/// Converts `from` into `to` (same shape; a 16-bit float type <-> f32, each
/// in its own layout: plain, or the registration's `movable`) on the
/// device's stream (`stream`: KernelContext::stream).
using ConvertTensor = llvm::Error (*)(const TensorView &from, const TensorView &to, void *stream);

/// Registers, for each op, the `narrow` (f16 or bf16) kernel of `kind` that
/// runs its f32 one; `convert` moves 4-D tensors between plain and
/// `movable` (Layout::Plain: it moves none).
void registerFloat16ViaF32(KernelRegistry &r, DeviceKind kind, DType narrow, llvm::ArrayRef<Op> ops,
                           ConvertTensor convert, Layout movable = Layout::Plain);

/// The layout answers of that kernel for node `n`, over an f32 kernel that
/// answers `inner`: `movable` for every 4-D `narrow` operand and result, and
/// for the others where `inner` takes it; no preference, not following.
LayoutAnswers float16ViaF32Layouts(const Node &n, DType narrow, const LayoutAnswers &inner,
                                   Layout movable);

} // namespace graphc
