//===- GpuLayoutRules.h - Which CUDA kernels take channels-last --*- C++ -*-===//
//
// The layout answers of every CUDA kernel, as a pure function of its node
// and the run's GPU layout policy: CudaKernel answers Kernel's layout
// questions from it, and the host tests ask it about whole GPU plans
// (executor/LayoutAssignment.h) without creating a kernel. Besides plain,
// a 4-D tensor may be channels-last (kernels/ChannelsLast.h) where:
//   - convolutions and their gradients compute in NHWC (their data type
//     allowed by the policy): every 4-D operand and result, the weights
//     included (an NHWC filter is KRSC), preferring it; a tensor that comes or
//     goes plain is transposed in the kernel's scratch (a reorder);
//   - pools and their gradients: each 4-D tensor in its own layout (the
//     index arithmetic reads and writes either), so a pool can also be where
//     a value changes layout, at no cost;
//   - global average pooling: its input (the spatial mean of NHWC);
//   - a Cast between float types: each side in its own layout (the
//     conversion transposes on the way when they differ);
//   - batch norms (BatchNorm.cpp) with a 4-D x: x, dy, the mask y and the
//     result y or dx, computing in the layout of x (a tensor of x's shape
//     in the other layout is transposed through scratch: a separate copy);
//     the channel vectors are plain;
//   - elementwise ops whose operands all have the result's shape, AddN,
//     Identity, Dropout at inference, Concat and Split (along any axis, the
//     stored one): all of a node's tensors together (layout-following);
//   - the 16-bit kernels that run an f32 kernel (Float16ViaF32.h: pools,
//     reductions): every 4-D 16-bit tensor, moved to plain by the widening
//     and rounding passes where the f32 kernel computes plain.
// Everything else (reshapes, matrix products, losses, dropout in training)
// is plain.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/LayoutAnswers.h"

namespace graphc {
namespace cuda {

/// The ops whose `narrow` (f16 or bf16) CUDA kernel runs their f32 one
/// (registerCudaFloat16ViaF32Kernels).
llvm::ArrayRef<Op> float16ViaF32Ops(DType narrow);

/// Whether the convolution node `n` (Conv, ConvGradData, ConvGradFilter)
/// computes in NHWC under `policy`.
bool convComputesChannelsLast(const Node &n, GpuLayout policy);

/// The layout answers of the CUDA kernel the registry creates for `n`.
LayoutAnswers gpuLayoutAnswers(const Node &n, GpuLayout policy);

/// The answers of the CUDA kernel class for `n` itself, which for the ops
/// of float16ViaF32Ops are those of the f32 kernel inside.
LayoutAnswers ownGpuLayoutAnswers(const Node &n, GpuLayout policy);

/// The layout copies the CUDA kernel of `n` runs per run, given the layouts
/// of its operands and results (the reorders it counts): `separate` ones are
/// a pass of their own (a convolution transposing a plain activation into
/// scratch), `fused` ones ride on a conversion the kernel makes anyway (a
/// Cast between float types, a 16-bit pool's widening and rounding, a bf16
/// convolution's narrowing of f32 weights).
struct LayoutCopies {
  int64_t separate = 0, fused = 0;
};
LayoutCopies gpuLayoutCopies(const Node &n, GpuLayout policy, llvm::ArrayRef<Layout> operands,
                             llvm::ArrayRef<Layout> results);

} // namespace cuda
} // namespace graphc
