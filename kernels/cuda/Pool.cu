//===- Pool.cu - Pooling and its gradients --------------------------------===//

#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/PoolDevice.h"

namespace graphc {
namespace cuda {
namespace {

__global__ void forwardKernel(PoolParams p, int64_t n, const float *x, float *y) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    y[e] = poolForwardAt(p, x, e);
}

__global__ void argMaxKernel(PoolParams p, int64_t n, const float *x, int *argmax) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    argmax[e] = poolArgMaxAt(p, x, e);
}

__global__ void backwardKernel(PoolParams p, int64_t n, const int *argmax, const float *dy,
                               float *dx) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    dx[e] = poolBackwardAt(p, argmax, dy, e);
}

} // namespace

cudaError_t launchPoolForward(const PoolParams &p, const float *x, float *y, cudaStream_t stream) {
  int64_t n = p.planes * p.oh * p.ow;
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  forwardKernel<<<l.blocks, l.threads, 0, stream>>>(p, n, x, y);
  return launched();
}

cudaError_t launchPoolBackward(const PoolParams &p, const float *x, const float *dy, int *argmax,
                               float *dx, cudaStream_t stream) {
  if (x) {
    int64_t outputs = p.planes * p.oh * p.ow;
    LaunchSize l = launchFor(outputs);
    if (l.blocks) {
      argMaxKernel<<<l.blocks, l.threads, 0, stream>>>(p, outputs, x, argmax);
      if (cudaError_t e = launched(); e != cudaSuccess)
        return e;
    }
  }
  int64_t n = p.planes * p.h * p.w;
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  backwardKernel<<<l.blocks, l.threads, 0, stream>>>(p, n, argmax, dy, dx);
  return launched();
}

} // namespace cuda
} // namespace graphc
