//===- Loss.cu - The loss op (cross-entropy, NLL, MSE) and its gradient ---===//
//
// One warp per row: lanes stride over the classes (an MSE row's elements),
// the maximum and the sums are combined with butterfly shuffles (a fixed
// order). A row's gradient is
// written only after its warp has read the whole row, so the gradient may
// overwrite the logits.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/LossDevice.h"

namespace graphc {
namespace cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kAll = 0xffffffffu;

__device__ int64_t labelOf(const LossParams &p, const void *labels, int64_t b) {
  return p.wideLabels ? static_cast<const int64_t *>(labels)[b]
                      : (int64_t) static_cast<const int32_t *>(labels)[b];
}

/// The row's maximum and sum of exp(x - max), the same in every lane.
__device__ void rowStats(const float *row, int64_t classes, int lane, float &top, double &sum) {
  top = -INFINITY;
  for (int64_t c = lane; c < classes; c += kWarp)
    top = fmaxf(top, row[c]);
  for (int s = kWarp / 2; s > 0; s /= 2)
    top = fmaxf(top, __shfl_xor_sync(kAll, top, s));
  sum = 0;
  for (int64_t c = lane; c < classes; c += kWarp)
    sum += (double)expf(row[c] - top);
  for (int s = kWarp / 2; s > 0; s /= 2)
    sum += __shfl_xor_sync(kAll, sum, s);
}

/// The sum of an MSE row's squared errors, the same in every lane.
__device__ double squaredErrors(const float *row, const float *target, int64_t n, int lane) {
  double sum = 0;
  for (int64_t c = lane; c < n; c += kWarp)
    sum += ((double)row[c] - target[c]) * ((double)row[c] - target[c]);
  for (int s = kWarp / 2; s > 0; s /= 2)
    sum += __shfl_xor_sync(kAll, sum, s);
  return sum;
}

__global__ void rowLossKernel(LossParams p, const float *logits, const void *labels,
                              double *rowLoss) {
  int lane = threadIdx.x % kWarp;
  int64_t warps = gridStride() / kWarp;
  for (int64_t b = gridStart() / kWarp; b < p.rows; b += warps) {
    const float *row = logits + b * p.classes;
    if (p.kind == LossKind::Mse) {
      double sum = squaredErrors(row, static_cast<const float *>(labels) + b * p.classes,
                                 p.classes, lane);
      if (lane == 0)
        rowLoss[b] = sum;
      continue;
    }
    int64_t label = labelOf(p, labels, b);
    bool bad = label < 0 || label >= p.classes;
    float top = 0;
    double sum = 1;
    if (p.kind == LossKind::CrossEntropy)
      rowStats(row, p.classes, lane, top, sum);
    if (lane == 0) {
      if (bad)
        recordBadValue(p.errors, p.site, b, label);
      rowLoss[b] = bad ? 0.0 : (double)top + log(sum) - (double)row[label];
    }
  }
}

/// One block adds the row losses in a fixed order.
__global__ void totalKernel(LossParams p, const double *rowLoss, float *loss) {
  __shared__ double sums[kThreads];
  double acc = 0;
  for (int64_t b = threadIdx.x; b < p.rows; b += blockDim.x)
    acc += rowLoss[b];
  sums[threadIdx.x] = acc;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if ((int)threadIdx.x < width)
      sums[threadIdx.x] += sums[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    *loss = (float)(sums[0] * p.scale);
}

__global__ void gradKernel(LossParams p, const float *logits, const void *labels,
                           const float *dloss, float *dlogits) {
  int lane = threadIdx.x % kWarp;
  int64_t warps = gridStride() / kWarp;
  float g = (float)((double)*dloss * p.scale);
  for (int64_t b = gridStart() / kWarp; b < p.rows; b += warps) {
    const float *row = logits + b * p.classes;
    float *out = dlogits + b * p.classes;
    if (p.kind == LossKind::Mse) {
      const float *target = static_cast<const float *>(labels) + b * p.classes;
      for (int64_t c = lane; c < p.classes; c += kWarp)
        out[c] = 2 * g * (row[c] - target[c]);
      continue;
    }
    int64_t label = labelOf(p, labels, b);
    bool bad = label < 0 || label >= p.classes;
    float top = 0;
    double sum = 1;
    if (p.kind == LossKind::CrossEntropy)
      rowStats(row, p.classes, lane, top, sum);
    if (bad && lane == 0)
      recordBadValue(p.errors, p.site, b, label);
    float shift = top + (float)log(sum);
    for (int64_t c = lane; c < p.classes; c += kWarp) {
      float v = p.kind == LossKind::Nll ? 0.0f : g * expf(row[c] - shift);
      if (c == label)
        v -= g;
      out[c] = bad ? 0.0f : v;
    }
  }
}

/// Blocks for one warp per row.
LaunchSize warpPerRow(int64_t rows) {
  return launchFor(rows * kWarp);
}

} // namespace

cudaError_t launchCrossEntropy(const LossParams &p, const float *logits, const void *labels,
                               double *rowLoss, float *loss, cudaStream_t stream) {
  LaunchSize l = warpPerRow(p.rows);
  if (l.blocks) {
    rowLossKernel<<<l.blocks, l.threads, 0, stream>>>(p, logits, labels, rowLoss);
    if (cudaError_t e = launched(); e != cudaSuccess)
      return e;
  }
  totalKernel<<<1, kThreads, 0, stream>>>(p, rowLoss, loss);
  return launched();
}

cudaError_t launchCrossEntropyGrad(const LossParams &p, const float *logits, const void *labels,
                                   const float *dloss, float *dlogits, cudaStream_t stream) {
  LaunchSize l = warpPerRow(p.rows);
  if (!l.blocks)
    return cudaSuccess;
  gradKernel<<<l.blocks, l.threads, 0, stream>>>(p, logits, labels, dloss, dlogits);
  return launched();
}

} // namespace cuda
} // namespace graphc
