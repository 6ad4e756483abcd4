//===- BatchNormDevice.h - Batch norm's per-element kernels ------*- C++ -*-===//
//
// Batch normalization on x viewed as [N, C, S] (S: the spatial size). The
// statistics come from the reduction engine (ReduceDevice.h); these are the
// per-element passes, with oneDNN's formulas (the CPU twin):
//   forward   y  = scale[c] / sqrt(var[c] + eps) * (x - mean[c]) + bias[c]
//   backward  inv = 1 / sqrt(var[c] + eps)
//             dscale[c] = sum(dy * (x - mean[c])) * inv     (dscaleFromDot)
//             dx = scale[c] * inv * (dy - dbias[c] / M - (x - mean[c]) * inv * dscale[c] / M)
// with M = N * S.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

namespace graphc {
namespace cuda {

struct ChannelShape {
  int64_t n = 0, c = 0, s = 1;
  GRAPHC_HD int64_t elements() const { return n * c * s; }
  /// 32-bit division where the tensor allows it: several times faster than
  /// 64-bit on a GPU, and every element needs one.
  GRAPHC_HD int64_t channelOf(int64_t i) const {
    if (elements() <= INT32_MAX)
      return (int64_t)(((uint32_t)i / (uint32_t)s) % (uint32_t)c);
    return (i / s) % c;
  }
};

/// Element i of the forward pass; `relu`: the fused ReLU (activation =
/// "relu", passes/InferenceFusion.h), as the Relu kernel computes it.
GRAPHC_HD float batchNormForwardAt(const ChannelShape &shape, float eps, bool relu, const float *x,
                                   const float *scale, const float *bias, const float *mean,
                                   const float *var, int64_t i) {
  int64_t c = shape.channelOf(i);
  float factor = scale[c] / sqrtf(var[c] + eps);
  float y = factor * (x[i] - mean[c]) + bias[c];
  return relu && y < 0 ? 0.0f : y;
}

cudaError_t launchBatchNormForward(const ChannelShape &shape, float eps, bool relu, const float *x,
                                   const float *scale, const float *bias, const float *mean,
                                   const float *var, float *y, cudaStream_t stream);
/// dscale[c] *= 1 / sqrt(var[c] + eps) (dscale holds sum(dy * (x - mean)) on entry).
cudaError_t launchBatchNormScaleGrad(int64_t channels, float eps, const float *var, float *dscale,
                                     cudaStream_t stream);
cudaError_t launchBatchNormBackward(const ChannelShape &shape, float eps, const float *x,
                                    const float *dy, const float *scale, const float *mean,
                                    const float *var, const float *dscale, const float *dbias,
                                    float *dx, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
