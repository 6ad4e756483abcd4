//===- LayerNorm.cu - Layer norm's row and column passes ------------------===//
//
// LayerNormDevice.h says what is computed and in which order; here are the
// blocks. Row kernels: one block of kLnThreads threads per row (the grid
// strides over rows), the row's sums through the shared-memory tree, then
// every thread writes its own elements of the row. The column kernel: one
// thread per column, the rows in order. LayerNormGrad runs statistics,
// column sums, then dx, so dx may overwrite dy.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/LayerNormDevice.h"

namespace graphc {
namespace cuda {
namespace {

/// The row sum of `term` by the whole block, returned to every thread.
template <typename Term> __device__ LnSums blockRowSums(const Term &term, int64_t d) {
  // Raw bytes: shared arrays take no constructors.
  __shared__ alignas(16) unsigned char raw[sizeof(LnSums) * kLnThreads];
  LnSums *partials = reinterpret_cast<LnSums *>(raw);
  const int t = threadIdx.x;
  partials[t] = lnLaneSums(term, d, t);
  __syncthreads();
  for (int h = kLnThreads / 2; h >= 1; h /= 2) {
    lnTreeRound(partials, h, t);
    __syncthreads();
  }
  LnSums total = partials[0];
  __syncthreads(); // the next sum may reuse the partials
  return total;
}

__device__ LnStats blockRowStats(const float *x, int64_t d, float eps) {
  double mean = lnMean(blockRowSums(LnValueTerm{x}, d).a, d);
  return {mean, lnRstd(blockRowSums(LnSquareTerm{x, mean}, d).a, d, eps)};
}

__global__ void __launch_bounds__(kLnThreads)
    forwardKernel(int64_t rows, int64_t d, float eps, const float *x, const float *scale,
                  const float *bias, float *y) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * d;
    LnStats s = blockRowStats(xr, d, eps);
    float *yr = y + r * d;
    for (int64_t j = threadIdx.x; j < d; j += kLnThreads)
      yr[j] = lnForward(xr[j], s, scale[j], bias ? bias[j] : 0.0f);
  }
}

__global__ void __launch_bounds__(kLnThreads)
    statisticsKernel(int64_t rows, int64_t d, float eps, const float *x, LnStats *stats) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    LnStats s = blockRowStats(x + r * d, d, eps);
    if (threadIdx.x == 0)
      stats[r] = s;
  }
}

__global__ void columnSumsKernel(int64_t rows, int64_t d, const float *x, const float *dy,
                                 const LnStats *stats, float *dscale, float *dbias) {
  for (int64_t j = gridStart(); j < d; j += gridStride()) {
    LnSums s = lnColumnSums(x, dy, stats, rows, d, j);
    dscale[j] = (float)s.a;
    dbias[j] = (float)s.b;
  }
}

__global__ void __launch_bounds__(kLnThreads)
    backwardKernel(int64_t rows, int64_t d, const float *x, const float *scale, const float *dy,
                   const LnStats *stats, float *dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * d, *dyr = dy + r * d;
    const LnStats s = stats[r];
    // Every thread has the sums (so has read its dy) before any dx is written.
    LnSums sums = blockRowSums(LnGradTerm{xr, dyr, scale, s}, d);
    const float meanG = (float)(sums.a / (double)d), meanGXhat = (float)(sums.b / (double)d);
    float *dxr = dx + r * d;
    for (int64_t j = threadIdx.x; j < d; j += kLnThreads)
      dxr[j] = lnBackward(xr[j], dyr[j], scale[j], s, meanG, meanGXhat);
  }
}

unsigned rowBlocks(int64_t rows) {
  return (unsigned)(rows < kMaxBlocks ? rows : kMaxBlocks);
}

} // namespace

cudaError_t launchLayerNormForward(int64_t rows, int64_t d, float eps, const float *x,
                                   const float *scale, const float *bias, float *y,
                                   cudaStream_t stream) {
  if (rows <= 0 || d <= 0)
    return cudaSuccess;
  forwardKernel<<<rowBlocks(rows), kLnThreads, 0, stream>>>(rows, d, eps, x, scale, bias, y);
  return launched();
}

cudaError_t launchLayerNormBackward(int64_t rows, int64_t d, float eps, const float *x,
                                    const float *scale, const float *dy, LnStats *stats, float *dx,
                                    float *dscale, float *dbias, cudaStream_t stream) {
  if (d <= 0)
    return cudaSuccess;
  if (rows > 0) {
    statisticsKernel<<<rowBlocks(rows), kLnThreads, 0, stream>>>(rows, d, eps, x, stats);
    if (cudaError_t e = launched(); e != cudaSuccess)
      return e;
  }
  // With no rows the column sums are zeros, as on the CPU.
  LaunchSize l = launchFor(d);
  columnSumsKernel<<<l.blocks, l.threads, 0, stream>>>(rows, d, x, dy, stats, dscale, dbias);
  if (cudaError_t e = launched(); e != cudaSuccess || rows <= 0)
    return e;
  backwardKernel<<<rowBlocks(rows), kLnThreads, 0, stream>>>(rows, d, x, scale, dy, stats, dx);
  return launched();
}

} // namespace cuda
} // namespace graphc
