//===- Dropout.cu - DropoutTrain with the CPU's mask streams --------------===//

#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/DropoutDevice.h"

namespace graphc {
namespace cuda {
namespace {

/// Draws one thread makes per round; each decides two elements.
constexpr int kDraws = 256;

/// The mask of n values, and y = x * mask unless kMaskOnly (a per-sample
/// mask, which samplesKernel applies).
template <typename T, bool kMaskOnly>
__global__ void dropoutKernel(DropoutParams p, int64_t n, const T *x, T *y, T *mask) {
  __shared__ uint64_t draws[kDraws];
  const uint64_t stepKey = maskStepKey(p.nodeKey, maskStep(p));
  int64_t blocks = (n + kMaskBlock - 1) / kMaskBlock;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    int64_t begin = b * kMaskBlock;
    int64_t len = n - begin < kMaskBlock ? n - begin : kMaskBlock;
    Xoshiro stream = maskStream(p, stepKey, b); // only thread 0 draws from it
    for (int64_t base = 0; base < len; base += 2 * kDraws) {
      int64_t elems = len - base < 2 * kDraws ? len - base : 2 * kDraws;
      if (threadIdx.x == 0)
        for (int64_t k = 0; k < (elems + 1) / 2; ++k)
          draws[k] = stream.next();
      __syncthreads();
      for (int64_t e = threadIdx.x; e < elems; e += blockDim.x) {
        int64_t i = begin + base + e;
        float m = maskValue(p, draws[e / 2], (int)(e & 1));
        if constexpr (!kMaskOnly)
          y[i] = fromFloat<T>(toFloat(x[i]) * m);
        mask[i] = fromFloat<T>(m);
      }
      __syncthreads(); // draws[] is refilled next round
    }
  }
}

/// y = x * mask, element i of sample i / inner.
template <typename T>
__global__ void samplesKernel(DropoutParams p, int64_t n, int64_t inner, const T *x, T *y,
                              const T *mask) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    y[i] = fromFloat<T>(toFloat(x[i]) * sampleScale(p, toFloat(mask[i / inner])));
}

/// Blocks for a mask of n values: one per kMaskBlock values, at most kMaxBlocks.
unsigned maskGrid(int64_t n) {
  int64_t blocks = (n + kMaskBlock - 1) / kMaskBlock;
  return (unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

} // namespace

cudaError_t launchDropoutTrain(int dtype, const DropoutParams &p, int64_t n, const void *x, void *y,
                               void *mask, cudaStream_t stream) {
  if (n <= 0)
    return cudaSuccess;
  return visitFloatType((ElemType)dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dropoutKernel<T, false><<<maskGrid(n), kThreads, 0, stream>>>(
        p, n, static_cast<const T *>(x), static_cast<T *>(y), static_cast<T *>(mask));
    return launched();
  });
}

cudaError_t launchSampleDropoutTrain(int dtype, const DropoutParams &p, int64_t n, int64_t samples,
                                     const void *x, void *y, void *mask, cudaStream_t stream) {
  LaunchSize l = launchFor(n);
  if (!l.blocks || samples <= 0)
    return cudaSuccess;
  return visitFloatType((ElemType)dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    dropoutKernel<T, true><<<maskGrid(samples), kThreads, 0, stream>>>(p, samples, nullptr, nullptr,
                                                                       static_cast<T *>(mask));
    if (cudaError_t e = launched(); e != cudaSuccess)
      return e;
    samplesKernel<T>
        <<<l.blocks, l.threads, 0, stream>>>(p, n, n / samples, static_cast<const T *>(x),
                                             static_cast<T *>(y), static_cast<const T *>(mask));
    return launched();
  });
}

} // namespace cuda
} // namespace graphc
