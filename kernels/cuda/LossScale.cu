//===- LossScale.cu - CheckFinite and LossScaleStep device code -----------===//

#include "kernels/LossScaleRule.h"
#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/LossScaleDevice.h"

#include <algorithm>

namespace graphc {
namespace cuda {
namespace {

template <typename Bits>
__global__ void checkFiniteKernel(const Bits *data, int64_t n, Bits exponent, float *check) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    if ((data[i] & exponent) == exponent) {
      *check = __int_as_float(0x7f800000);
      return;
    }
}

__global__ void lossScaleStepKernel(const float *check, float interval, float *scale, float *good,
                                    float *skipped, float *decision) {
  lossScaleStep(*check, interval, *scale, *good, *skipped, decision);
}

} // namespace

cudaError_t launchCheckFinite(const void *data, int64_t n, int bytes, uint32_t exponent,
                              float *check, cudaStream_t stream) {
  if (n <= 0)
    return cudaSuccess;
  int blocks = (int)std::min<int64_t>((n + kThreads - 1) / kThreads, 1024);
  if (bytes == 4)
    checkFiniteKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t *>(data), n,
                                                       exponent, check);
  else
    checkFiniteKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t *>(data), n,
                                                       (uint16_t)exponent, check);
  return launched();
}

cudaError_t launchLossScaleStep(const float *check, float interval, float *scale, float *good,
                                float *skipped, float *decision, cudaStream_t stream) {
  lossScaleStepKernel<<<1, 1, 0, stream>>>(check, interval, scale, good, skipped, decision);
  return launched();
}

} // namespace cuda
} // namespace graphc
