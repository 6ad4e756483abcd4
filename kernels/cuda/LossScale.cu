//===- LossScale.cu - CheckFinite and LossScaleStep device code -----------===//

#include "kernels/LossScaleRule.h"
#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/LossScaleDevice.h"

#include <algorithm>

namespace graphc {
namespace cuda {
namespace {

template <typename Bits> __device__ bool anyNonFinite(const CheckTensor &t) {
  const Bits *data = static_cast<const Bits *>(t.data);
  const Bits exponent = (Bits)t.exponent;
  for (int64_t i = gridStart(); i < t.n; i += gridStride())
    if ((data[i] & exponent) == exponent)
      return true;
  return false;
}

/// Row y of the grid checks tensor y of the list.
__global__ void checkFiniteKernel(CheckList list, float *check) {
  const CheckTensor &t = list.tensors[blockIdx.y];
  bool bad = t.bytes == 4 ? anyNonFinite<uint32_t>(t) : anyNonFinite<uint16_t>(t);
  if (bad)
    *check = __int_as_float(0x7f800000);
}

__global__ void lossScaleStepKernel(const float *check, float interval, float *scale, float *good,
                                    float *skipped, float *decision) {
  lossScaleStep(*check, interval, *scale, *good, *skipped, decision);
}

} // namespace

cudaError_t launchCheckFinite(const CheckList &list, float *check, cudaStream_t stream) {
  int64_t largest = 0;
  for (int i = 0; i < list.count; ++i)
    largest = std::max(largest, list.tensors[i].n);
  if (list.count <= 0 || largest <= 0)
    return cudaSuccess;
  // gridStart()/gridStride() span the x extent, so a row covers its tensor.
  unsigned blocks = (unsigned)std::min<int64_t>((largest + kThreads - 1) / kThreads, 1024);
  checkFiniteKernel<<<dim3(blocks, (unsigned)list.count), kThreads, 0, stream>>>(list, check);
  return launched();
}

cudaError_t launchLossScaleStep(const float *check, float interval, float *scale, float *good,
                                float *skipped, float *decision, cudaStream_t stream) {
  lossScaleStepKernel<<<1, 1, 0, stream>>>(check, interval, scale, good, skipped, decision);
  return launched();
}

} // namespace cuda
} // namespace graphc
