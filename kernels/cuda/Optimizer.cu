//===- Optimizer.cu - The tensor-list optimizer update --------------------===//

#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/OptimizerDevice.h"

namespace graphc {
namespace cuda {
namespace {

__global__ void tensorListKernel(UpdateRule rule, UpdateHyper h, TensorList list) {
  for (int b = blockIdx.x; b < list.blocks; b += gridDim.x) {
    const ListTensor &t = list.tensors[list.blockTensor[b]];
    int64_t begin = (int64_t)list.blockChunk[b] * kListChunk;
    int64_t end = begin + kListChunk < t.n ? begin + kListChunk : t.n;
    float lr = *t.lr;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
      updateElement(rule, h, lr, t.param + i, t.slot0 ? t.slot0 + i : nullptr,
                    t.slot1 ? t.slot1 + i : nullptr, t.grad[i]);
  }
}

} // namespace

cudaError_t launchTensorList(UpdateRule rule, const UpdateHyper &h, const TensorList &list,
                             cudaStream_t stream) {
  if (list.blocks <= 0)
    return cudaSuccess;
  tensorListKernel<<<list.blocks, kThreads, 0, stream>>>(rule, h, list);
  return launched();
}

} // namespace cuda
} // namespace graphc
