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
    float lr = *t.lr, unscale = 1;
    UpdateHyper at = h;
    if (t.decision) {
      if (t.decision[0] == 0)
        continue; // the gradients overflowed: no update this step
      unscale = t.decision[1];
      if (rule == UpdateRule::Adam) {
        double step = h.stepPlus1 - (double)t.decision[2];
        at.adamBias1 = 1 - pow(h.beta1d, step);
        at.invRootBias2 = (float)(1 / sqrt(1 - pow(h.beta2d, step)));
      }
    }
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
      updateElement(rule, at, lr, t.param + i, t.slot0 ? t.slot0 + i : nullptr,
                    t.slot1 ? t.slot1 + i : nullptr, t.grad[i] * unscale);
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
