//===- Gemm.cu - Pointer arrays of a broadcast batched GEMM ---------------===//

#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/GemmDevice.h"

namespace graphc {
namespace cuda {
namespace {

__global__ void batchPointersKernel(StridedIndex<2> index, int64_t batch, const float *a,
                                    const float *b, float *c, int64_t strideC, void **pointers) {
  for (int64_t i = gridStart(); i < batch; i += gridStride()) {
    int64_t off[2];
    index.offsets(i, off);
    pointers[i] = const_cast<float *>(a + off[0]);
    pointers[batch + i] = const_cast<float *>(b + off[1]);
    pointers[2 * batch + i] = c + i * strideC;
  }
}

} // namespace

cudaError_t launchBatchPointers(const StridedIndex<2> &index, int64_t batch, const float *a,
                                const float *b, float *c, int64_t strideC, void **pointers,
                                cudaStream_t stream) {
  LaunchSize l = launchFor(batch);
  if (!l.blocks)
    return cudaSuccess;
  batchPointersKernel<<<l.blocks, l.threads, 0, stream>>>(index, batch, a, b, c, strideC, pointers);
  return launched();
}

} // namespace cuda
} // namespace graphc
