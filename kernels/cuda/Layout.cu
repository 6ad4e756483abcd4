//===- Layout.cu - NCHW <-> NHWC copies through shared-memory tiles -------===//

#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/LayoutDevice.h"

namespace graphc {
namespace cuda {
namespace {

/// One block per tile (grid-stride over tiles): the tile is read along its
/// rows into shared memory and written along its columns, so both global
/// accesses are contiguous. The extra column keeps the column reads free of
/// shared-memory bank conflicts.
template <typename To, typename From>
__global__ void transposeKernel(TransposeShape s, int64_t tiles, To *out, const From *in) {
  __shared__ From tile[kTransposeTile][kTransposeTile + 1];
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const TransposeTile at = transposeTileAt(s, t);
    for (int i = threadIdx.y; i < kTransposeTile; i += blockDim.y) {
      const int64_t row = at.row + i, col = at.col + threadIdx.x;
      if (row < s.rows && col < s.cols)
        tile[i][threadIdx.x] = in[transposeSource(s, at.matrix, row, col)];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTransposeTile; i += blockDim.y) {
      const int64_t row = at.row + threadIdx.x, col = at.col + i;
      if (row < s.rows && col < s.cols)
        out[transposeTarget(s, at.matrix, row, col)] = convertElement<To>(tile[threadIdx.x][i]);
    }
    __syncthreads();
  }
}

} // namespace

cudaError_t launchLayoutCopy(ElemType from, ElemType to, const TransposeShape &s, void *out,
                             const void *in, cudaStream_t stream) {
  const int64_t tiles = transposeTiles(s);
  if (tiles <= 0)
    return cudaSuccess;
  const unsigned blocks = (unsigned)(tiles < kMaxBlocks ? tiles : kMaxBlocks);
  const dim3 threads(kTransposeTile, kTransposeRows);
  return visitAnyType(from, [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    return visitAnyType(to, [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      transposeKernel<To, From><<<blocks, threads, 0, stream>>>(s, tiles, static_cast<To *>(out),
                                                                static_cast<const From *>(in));
      return launched();
    });
  });
}

} // namespace cuda
} // namespace graphc
