//===- SumRanks.cu - The project's own all-reduce kernel ------------------===//
//
// One grid row (blockIdx.y) per tensor, grid-stride loops over its elements;
// 16-byte vectors when every pointer of the tensor is 16-byte aligned (arena
// slices are 64-byte aligned, so in practice always), a scalar tail.
//
//===----------------------------------------------------------------------===//

#include "executor/cuda/SumRanks.h"

#include <algorithm>

namespace graphc {
namespace {

__global__ void sumRanksKernel(SumRanksBatch b, unsigned vectorMask) {
  const int t = blockIdx.y;
  const int64_t n = b.count[t];
  const int ranks = b.ranks;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t scalarFrom = 0;
  if (vectorMask & (1u << t)) {
    const int64_t n4 = n / 4;
    for (int64_t i = first; i < n4; i += stride) {
      float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int r = 0; r < ranks; ++r) {
        float4 v = reinterpret_cast<const float4 *>(b.in[t][r])[i];
        s.x += v.x;
        s.y += v.y;
        s.z += v.z;
        s.w += v.w;
      }
      for (int r = 0; r < ranks; ++r)
        reinterpret_cast<float4 *>(b.out[t][r])[i] = s;
    }
    scalarFrom = n4 * 4;
  }
  for (int64_t i = scalarFrom + first; i < n; i += stride) {
    float s = 0.f;
    for (int r = 0; r < ranks; ++r)
      s += b.in[t][r][i];
    for (int r = 0; r < ranks; ++r)
      b.out[t][r][i] = s;
  }
}

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

} // namespace

cudaError_t launchSumRanks(const SumRanksBatch &batch, cudaStream_t stream) {
  if (batch.tensors <= 0 || batch.ranks <= 0)
    return cudaSuccess;
  unsigned vectorMask = 0;
  int64_t largest = 0;
  for (int t = 0; t < batch.tensors; ++t) {
    bool ok = true;
    for (int r = 0; r < batch.ranks; ++r)
      ok = ok && aligned16(batch.in[t][r]) && aligned16(batch.out[t][r]);
    if (ok)
      vectorMask |= 1u << t;
    largest = std::max(largest, batch.count[t]);
  }
  if (largest == 0)
    return cudaSuccess;
  const int threads = 256;
  // Enough blocks to fill the GPU for the largest tensor, no more.
  int64_t blocks = (largest / 4 + threads - 1) / threads;
  blocks = std::max<int64_t>(1, std::min<int64_t>(blocks, 1024));
  dim3 grid((unsigned)blocks, (unsigned)batch.tensors);
  sumRanksKernel<<<grid, threads, 0, stream>>>(batch, vectorMask);
  return cudaGetLastError();
}

} // namespace graphc
