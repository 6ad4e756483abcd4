//===- LossScaleDevice.h - Dynamic loss scaling on the GPU -------*- C++ -*-===//
//
// The device halves of CheckFinite and LossScaleStep (kernels/cuda/
// LossScale.cpp): a grid-stride test of one tensor's bits that writes +inf
// into the check when it meets an infinity or a NaN (every writer writes the
// same value, so no atomics), and one thread that runs the shared rule
// (kernels/LossScaleRule.h) on the three device scalars.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace graphc {
namespace cuda {

/// Marks `check` (+inf) when any of the n elements of `data` is not finite.
/// `bytes` is the element size (4: f32, 2: f16 or bf16 with its exponent
/// mask).
cudaError_t launchCheckFinite(const void *data, int64_t n, int bytes, uint32_t exponent,
                              float *check, cudaStream_t stream);

/// lossScaleStep on device scalars.
cudaError_t launchLossScaleStep(const float *check, float interval, float *scale, float *good,
                                float *skipped, float *decision, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
