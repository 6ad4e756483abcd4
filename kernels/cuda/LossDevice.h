//===- LossDevice.h - The loss op's launchers --------------------*- C++ -*-===//
//
// SoftmaxCrossEntropy {scale, loss} and its gradient, the CPU twin's formulas
// (kernels/cpu/Loss.cpp). Softmax cross-entropy (logits [B, C], labels [B]):
// per row the maximum, the sum of exp(x - max) in double, loss_b = max +
// log(sum) - x[label]; gradient dloss * scale * (softmax(row) -
// onehot(label)). NLL: loss_b = -x[label]; gradient -dloss * scale * onehot.
// MSE (targets of the output's shape, a row each sample): loss_b = the sum
// of (x - t)^2 in double, lanes' partial sums combined in a fixed order;
// gradient 2 * dloss * scale * (x - t). The loss is scale * sum_b loss_b,
// summed in a fixed order (deterministic).
//
// A label outside [0, C) must not fault the GPU: it is recorded in the
// device error word (reported by CudaBackend::takeDeviceError) and its row
// contributes 0 to the loss and a zero gradient.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/LossKind.h"
#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

namespace graphc {
namespace cuda {

struct LossParams {
  LossKind kind = LossKind::CrossEntropy;
  int64_t rows = 0, classes = 0; ///< classes: an MSE row's elements
  double scale = 1;
  bool wideLabels = true; ///< i64 (else i32)
  DeviceErrorWord *errors = nullptr;
  int32_t site = 0;
};

/// `rowLoss` is scratch for `rows` doubles; `labels` are MSE's float targets.
cudaError_t launchCrossEntropy(const LossParams &p, const float *logits, const void *labels,
                               double *rowLoss, float *loss, cudaStream_t stream);
/// dlogits may be logits (in place).
cudaError_t launchCrossEntropyGrad(const LossParams &p, const float *logits, const void *labels,
                                   const float *dloss, float *dlogits, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
