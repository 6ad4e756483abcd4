//===- Reduce.cu - The reduction engine's kernels -------------------------===//
//
// See ReduceDevice.h for the plan. Block mode: a block per (output, chunk),
// looping over pieces with a grid stride (the grid is capped), so every
// thread of a block takes the same path through __syncthreads.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/ReduceDevice.h"

namespace graphc {
namespace cuda {
namespace {

__device__ void storeSum(const ReducePlan &plan, const ReduceArgs &a, int64_t o, int64_t chunk,
                         double sum, float *out, double *partial) {
  if (plan.chunks == 1)
    out[o] = (float)(sum * a.scale);
  else
    partial[o * plan.chunks + chunk] = sum;
}

__global__ void reduceBlocks(ReducePlan plan, ReduceArgs a, float *out, double *partial) {
  __shared__ double sums[kReduceThreads];
  int64_t pieces = plan.outputs * plan.chunks;
  for (int64_t piece = blockIdx.x; piece < pieces; piece += gridDim.x) {
    int64_t o = piece / plan.chunks, chunk = piece % plan.chunks;
    int64_t keptOffset;
    a.kept.offsets(o, &keptOffset);
    int64_t begin = chunk * plan.chunkLen;
    int64_t end = begin + plan.chunkLen < plan.count ? begin + plan.chunkLen : plan.count;
    double acc = 0;
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x)
      acc += reduceTerm(a, o, keptOffset, r);
    sums[threadIdx.x] = acc;
    __syncthreads();
    for (int width = kReduceThreads / 2; width > 0; width /= 2) {
      if ((int)threadIdx.x < width)
        sums[threadIdx.x] += sums[threadIdx.x + width];
      __syncthreads();
    }
    if (threadIdx.x == 0)
      storeSum(plan, a, o, chunk, sums[0], out, partial);
    __syncthreads(); // sums[] is reused by the next piece
  }
}

__global__ void reduceThreads(ReducePlan plan, ReduceArgs a, float *out, double *partial) {
  int64_t pieces = plan.outputs * plan.chunks;
  for (int64_t piece = gridStart(); piece < pieces; piece += gridStride()) {
    // Consecutive threads take consecutive outputs of one chunk.
    int64_t o = piece % plan.outputs, chunk = piece / plan.outputs;
    int64_t keptOffset;
    a.kept.offsets(o, &keptOffset);
    int64_t begin = chunk * plan.chunkLen;
    int64_t end = begin + plan.chunkLen < plan.count ? begin + plan.chunkLen : plan.count;
    double acc = 0;
    for (int64_t r = begin; r < end; ++r)
      acc += reduceTerm(a, o, keptOffset, r);
    storeSum(plan, a, o, chunk, acc, out, partial);
  }
}

__global__ void reducePartials(ReducePlan plan, double scale, float *out, const double *partial) {
  for (int64_t o = gridStart(); o < plan.outputs; o += gridStride()) {
    double acc = 0;
    for (int64_t c = 0; c < plan.chunks; ++c)
      acc += partial[o * plan.chunks + c];
    out[o] = (float)(acc * scale);
  }
}

__global__ void fillKernel(float value, int64_t n, float *out) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    out[i] = value;
}

} // namespace

cudaError_t launchReduce(const ReducePlan &plan, const ReduceArgs &args, float *out, void *scratch,
                         cudaStream_t stream) {
  int64_t pieces = plan.outputs * plan.chunks;
  if (pieces <= 0)
    return cudaSuccess;
  auto *partial = static_cast<double *>(scratch);
  if (plan.mode == ReduceMode::Block) {
    unsigned blocks = (unsigned)(pieces < kMaxBlocks ? pieces : kMaxBlocks);
    reduceBlocks<<<blocks, kReduceThreads, 0, stream>>>(plan, args, out, partial);
  } else {
    LaunchSize l = launchFor(pieces);
    reduceThreads<<<l.blocks, l.threads, 0, stream>>>(plan, args, out, partial);
  }
  if (cudaError_t e = launched(); e != cudaSuccess || plan.chunks == 1)
    return e;
  LaunchSize l = launchFor(plan.outputs);
  reducePartials<<<l.blocks, l.threads, 0, stream>>>(plan, args.scale, out, partial);
  return launched();
}

cudaError_t launchFill(float value, int64_t n, float *out, cudaStream_t stream) {
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  fillKernel<<<l.blocks, l.threads, 0, stream>>>(value, n, out);
  return launched();
}

} // namespace cuda
} // namespace graphc
