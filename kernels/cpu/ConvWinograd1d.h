//===- ConvWinograd1d.h - Convolution kernels by the 1-D Winograd -*- C++ -*-===//
//
// Conv, ConvGradData and ConvGradFilter of the 1xK / Kx1 convolutions that
// kernels/cpu/Winograd1d.h computes, as kernels: the activations in the
// channel-blocked layout (staged when the executor holds them plain), the
// weights and their gradient plain. Conv.cpp's factories ask
// winograd1dTakes() first and fall back to oneDNN's direct convolution.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"

namespace graphc {

/// Whether the 1-D Winograd computes node `n` (a Conv, ConvGradData or
/// ConvGradFilter) under --conv-algorithm `choice` on this CPU: never under
/// direct; under winograd every shape it can take (f32, one group, stride 1,
/// no dilation, 1 x K or K x 1 with K = 3, 5 or 7 and "same" padding, whole
/// channel blocks, no fused activation or addend, AVX2 or AVX-512); under
/// auto the 3- and 7-tap ones (measured faster: inception_v3's; the 5-tap
/// ones, which no model here has, were not measured).
bool winograd1dTakes(const Node &n, ConvAlgorithm choice);

/// The kernel for a node winograd1dTakes() accepted.
llvm::Expected<std::unique_ptr<Kernel>> makeWinograd1dKernel(const Node &n, const KernelEnv &env);

} // namespace graphc
