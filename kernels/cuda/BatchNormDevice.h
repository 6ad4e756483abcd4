//===- BatchNormDevice.h - Batch norm's kernels ------------------*- C++ -*-===//
//
// Batch normalization on x viewed as [N, C, S] (BatchNormPlan.h: the walk,
// the sums and their order), in f32, f16 or bf16 storage (x, dy, the fused
// forward's y, the results y and dx) with f32 arithmetic and f32 channel
// vectors, with oneDNN's formulas (the CPU twin) and the biased batch
// variance:
//   statistics  K = the channel's first element, d = x - K,
//               mean = K + sum(d) / M, var = sum(d^2) / M - (sum(d) / M)^2
//               (one pass; float over kBnFlush chunks per thread, then double)
//   forward     y  = scale[c] / sqrt(var[c] + eps) * (x - mean[c]) + bias[c],
//               then max(y, 0) with the fused ReLU
//   backward    dy' = dy, or (y > 0 ? dy : 0) with the fused ReLU (y: the
//               fused forward's output);
//               inv = 1 / sqrt(var[c] + eps), dbias[c] = sum(dy'),
//               dscale[c] = sum(dy' * (x - mean[c])) * inv,
//               dx = scale[c] * inv * (dy' - dbias[c] / M - (x - mean[c]) * inv * dscale[c] / M)
// with M = N * S. Each launcher runs its passes on `stream`; `partials`
// holds BnPlan::partials() sums.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/BatchNormPlan.h"
#include "kernels/cuda/ElementwiseDevice.h"

#include <cuda_runtime_api.h>

#include <cmath>

namespace graphc {
namespace cuda {

/// A channel's forward constants.
struct BnForwardChannel {
  float factor, mean, bias;
};
GRAPHC_HD BnForwardChannel bnForwardChannel(float scale, float bias, float mean, float var,
                                            float eps) {
  return {scale / sqrtf(var + eps), mean, bias};
}
GRAPHC_HD float bnForward(const BnForwardChannel &k, bool relu, float x) {
  float y = k.factor * (x - k.mean) + k.bias;
  return relu && y < 0 ? 0.0f : y;
}

/// dy' of the fused ReLU's mask (`masked`: y is the forward's output).
GRAPHC_HD float bnMaskedGradient(float dy, bool masked, float y) {
  return masked && !(y > 0) ? 0.0f : dy;
}

/// A channel's backward constants: dx = a * (dy' - b - (x - mean) * d).
struct BnBackwardChannel {
  float a, b, d, mean;
};
GRAPHC_HD BnBackwardChannel bnBackwardChannel(float scale, float mean, float var, float dscale,
                                              float dbias, float eps, int64_t count) {
  const float inv = 1.0f / sqrtf(var + eps), m = (float)count;
  return {scale * inv, dbias / m, inv * dscale / m, mean};
}
GRAPHC_HD float bnBackward(const BnBackwardChannel &k, float x, float dy) {
  return k.a * (dy - k.b - (x - k.mean) * k.d);
}

/// The gradient's sums merged: dbias = sum(dy'), dscale = sum(dy' * (x - mean)) * inv.
GRAPHC_HD void bnGradientSums(const BnSums &s, float var, float eps, float &dscale, float &dbias) {
  dbias = (float)s.p;
  dscale = (float)s.q * (1.0f / sqrtf(var + eps));
}

/// The batch's mean and biased variance of x (the statistics pass and the
/// merge).
cudaError_t launchBatchNormStatistics(ElemType t, const BnPlan &p, const void *x, BnSums *partials,
                                      float *mean, float *var, cudaStream_t stream);

/// y of x (in place allowed).
cudaError_t launchBatchNormForward(ElemType t, const BnPlan &p, float eps, bool relu, const void *x,
                                   const float *scale, const float *bias, const float *mean,
                                   const float *var, void *y, cudaStream_t stream);

/// dscale and dbias (the sums pass and the merge); `y` null: no mask.
cudaError_t launchBatchNormGradientSums(ElemType t, const BnPlan &p, float eps, const void *x,
                                        const void *dy, const void *y, const float *mean,
                                        const float *var, BnSums *partials, float *dscale,
                                        float *dbias, cudaStream_t stream);

/// dx; `y` null: no mask.
cudaError_t launchBatchNormBackward(ElemType t, const BnPlan &p, float eps, const void *x,
                                    const void *dy, const void *y, const float *scale,
                                    const float *mean, const float *var, const float *dscale,
                                    const float *dbias, void *dx, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
