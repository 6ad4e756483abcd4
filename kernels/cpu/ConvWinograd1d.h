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
/// ConvGradFilter) under --conv-algorithm `choice` on this CPU, where
/// `libraryWinograd` says whether oneDNN's own Winograd would take it: never
/// under direct, nor where oneDNN's does; under winograd every shape it can
/// take (f32, one group, stride 1, no dilation, a window 3, 5 or 7 wide, or
/// K x 1, padding below the window, whole channel blocks, AVX2 or AVX-512;
/// an inference convolution's fused ReLU and residual add are applied in its
/// output transform, and its transformed weights kept while no step changes
/// them); under auto those measured faster
/// than direct (docs/cpu-kernels.md): 1x3, 1x7, 3x1, 7x1, and 3x3 and 5x5
/// windows of at least 10^8 multiply-adds and at least 64 per byte of
/// transformed weights.
bool winograd1dTakes(const Node &n, ConvAlgorithm choice, bool libraryWinograd);

/// Whether this CPU has the vector code for it (AVX2 with FMA, or AVX-512, in
/// the channel block oneDNN computes in here).
bool winograd1dAvailable();

/// The kernel for a node winograd1dTakes() accepted.
llvm::Expected<std::unique_ptr<Kernel>> makeWinograd1dKernel(const Node &n, const KernelEnv &env);

} // namespace graphc
