//===- LossDevice.h - Softmax cross-entropy launchers ------------*- C++ -*-===//
//
// SoftmaxCrossEntropy {scale}(logits [B, C], labels [B]) and its gradient,
// the CPU twin's formulas (kernels/cpu/Loss.cpp): per row the maximum, the
// sum of exp(x - max) in double, loss_b = max + log(sum) - x[label]; the
// loss is scale * sum_b loss_b, summed in a fixed order (deterministic).
// Gradient: dloss * scale * (softmax(row) - onehot(label)).
//
// A label outside [0, C) must not fault the GPU: it is recorded in the
// device error word (reported by CudaBackend::takeDeviceError) and its row
// contributes 0 to the loss and a zero gradient.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

namespace graphc {
namespace cuda {

struct LossParams {
  int64_t rows = 0, classes = 0;
  double scale = 1;
  bool wideLabels = true; ///< i64 (else i32)
  DeviceErrorWord *errors = nullptr;
  int32_t site = 0;
};

/// `rowLoss` is scratch for `rows` doubles.
cudaError_t launchCrossEntropy(const LossParams &p, const float *logits, const void *labels,
                               double *rowLoss, float *loss, cudaStream_t stream);
/// dlogits may be logits (in place).
cudaError_t launchCrossEntropyGrad(const LossParams &p, const float *logits, const void *labels,
                                   const float *dloss, float *dlogits, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
