//===- LossScaleDevice.h - Dynamic loss scaling on the GPU -------*- C++ -*-===//
//
// The device halves of CheckFinite and LossScaleStep (kernels/cuda/
// LossScale.cpp): a grid-stride test of the bits of up to 32 tensors per
// launch (one grid row each) that writes +inf into the check when it meets
// an infinity or a NaN (every writer writes the same value, so no atomics),
// and one thread that runs the shared rule
// (kernels/LossScaleRule.h) on the three device scalars.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace graphc {
namespace cuda {

/// One tensor to check: `bytes` per element (4: f32, 2: f16 or bf16) and the
/// exponent mask of its dtype.
struct CheckTensor {
  const void *data = nullptr;
  int64_t n = 0;
  uint32_t exponent = 0;
  int bytes = 4;
};

/// Tensors one launch checks (a CUDA grid's y extent each).
inline constexpr int kCheckTensors = 32;

struct CheckList {
  CheckTensor tensors[kCheckTensors];
  int count = 0;
};

/// Marks `check` (+inf) when any element of the list's tensors is not
/// finite: one launch for up to kCheckTensors tensors.
cudaError_t launchCheckFinite(const CheckList &list, float *check, cudaStream_t stream);

/// lossScaleStep on device scalars.
cudaError_t launchLossScaleStep(const float *check, float interval, float *scale, float *good,
                                float *skipped, float *decision, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
