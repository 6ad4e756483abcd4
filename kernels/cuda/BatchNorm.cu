//===- BatchNorm.cu - Batch norm's per-element passes ---------------------===//

#include "kernels/cuda/BatchNormDevice.h"
#include "kernels/cuda/Dispatch.cuh"

namespace graphc {
namespace cuda {
namespace {

__global__ void forwardKernel(ChannelShape shape, float eps, bool relu, const float *x,
                              const float *scale, const float *bias, const float *mean,
                              const float *var, float *y) {
  int64_t n = shape.elements();
  for (int64_t i = gridStart(); i < n; i += gridStride())
    y[i] = batchNormForwardAt(shape, eps, relu, x, scale, bias, mean, var, i);
}

__global__ void scaleGradKernel(int64_t channels, float eps, const float *var, float *dscale) {
  for (int64_t c = gridStart(); c < channels; c += gridStride())
    dscale[c] *= 1.0f / sqrtf(var[c] + eps);
}

__global__ void backwardKernel(ChannelShape shape, float eps, const float *x, const float *dy,
                               const float *scale, const float *mean, const float *var,
                               const float *dscale, const float *dbias, float *dx) {
  int64_t n = shape.elements();
  float m = (float)(shape.n * shape.s);
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t c = shape.channelOf(i);
    float inv = 1.0f / sqrtf(var[c] + eps);
    float centred = x[i] - mean[c];
    dx[i] = scale[c] * inv * (dy[i] - dbias[c] / m - centred * inv * dscale[c] / m);
  }
}

} // namespace

cudaError_t launchBatchNormForward(const ChannelShape &shape, float eps, bool relu, const float *x,
                                   const float *scale, const float *bias, const float *mean,
                                   const float *var, float *y, cudaStream_t stream) {
  LaunchSize l = launchFor(shape.elements());
  if (!l.blocks)
    return cudaSuccess;
  forwardKernel<<<l.blocks, l.threads, 0, stream>>>(shape, eps, relu, x, scale, bias, mean, var, y);
  return launched();
}

cudaError_t launchBatchNormScaleGrad(int64_t channels, float eps, const float *var, float *dscale,
                                     cudaStream_t stream) {
  LaunchSize l = launchFor(channels);
  if (!l.blocks)
    return cudaSuccess;
  scaleGradKernel<<<l.blocks, l.threads, 0, stream>>>(channels, eps, var, dscale);
  return launched();
}

cudaError_t launchBatchNormBackward(const ChannelShape &shape, float eps, const float *x,
                                    const float *dy, const float *scale, const float *mean,
                                    const float *var, const float *dscale, const float *dbias,
                                    float *dx, cudaStream_t stream) {
  LaunchSize l = launchFor(shape.elements());
  if (!l.blocks)
    return cudaSuccess;
  backwardKernel<<<l.blocks, l.threads, 0, stream>>>(shape, eps, x, dy, scale, mean, var, dscale,
                                                     dbias, dx);
  return launched();
}

} // namespace cuda
} // namespace graphc
