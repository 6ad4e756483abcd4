//===- Shape.cu - Strided copies, Pad, Gather and GatherGrad --------------===//
//
// Grid-stride loops over the output with 64-bit indices. Elements move as
// unsigned words of their size, so every dtype shares one instantiation per
// size. GatherGrad gives each thread one (row, column) pair and walks the
// indices in order, so repeated indices accumulate in a fixed order without
// atomics.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Dispatch.cuh"
#include "kernels/cuda/ShapeDevice.h"

namespace graphc {
namespace cuda {
namespace {

template <typename W>
__global__ void stridedCopyKernel(StridedIndex<1> index, int64_t n, W *out, const W *in) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t off;
    index.offsets(i, &off);
    out[i] = in[off];
  }
}

template <typename W> __global__ void padKernel(PadParams p, int64_t n, W *out, const W *in) {
  W fill;
  memcpy(&fill, &p.fill, sizeof(W));
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t from = padSourceOffset(p, i);
    out[i] = from < 0 ? fill : in[from];
  }
}

template <typename W>
__global__ void gatherKernel(GatherParams p, int64_t n, W *out, const W *data,
                             const void *indices) {
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    int64_t j, from;
    gatherSource(p, indices, e, j, from);
    if (from >= 0) {
      out[e] = data[from];
      continue;
    }
    out[e] = W(0);
    if (e % p.post == 0 && e / p.post < p.count) // once per bad index position
      recordBadValue(p.errors, p.site, j, readIndex(indices, p.wideIndices, j));
  }
}

__global__ void gatherGradKernel(GatherParams p, float *dx, const float *dy, const void *indices) {
  int64_t columns = p.pre * p.post;
  for (int64_t w = gridStart(); w < columns; w += gridStride()) {
    int64_t row = w / p.post, c = w % p.post;
    for (int64_t j = 0; j < p.count; ++j) {
      int64_t v = readIndex(indices, p.wideIndices, j);
      int64_t at = normalizeIndex(v, p.dim);
      if (at < 0) {
        if (w == 0)
          recordBadValue(p.errors, p.site, j, v);
        continue;
      }
      dx[(row * p.dim + at) * p.post + c] += dy[(row * p.count + j) * p.post + c];
    }
  }
}

/// Calls f(Tag<W>) with the unsigned word of `elemSize` bytes.
template <typename F> cudaError_t visitWord(size_t elemSize, F &&f) {
  switch (elemSize) {
  case 1:
    return f(Tag<uint8_t>{});
  case 2:
    return f(Tag<uint16_t>{});
  case 4:
    return f(Tag<uint32_t>{});
  case 8:
    return f(Tag<uint64_t>{});
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

cudaError_t launchStridedCopy(size_t elemSize, const StridedIndex<1> &index, int64_t n, void *out,
                              const void *in, cudaStream_t stream) {
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  return visitWord(elemSize, [&](auto tag) {
    using W = typename decltype(tag)::type;
    stridedCopyKernel<W><<<l.blocks, l.threads, 0, stream>>>(index, n, static_cast<W *>(out),
                                                             static_cast<const W *>(in));
    return launched();
  });
}

cudaError_t launchPad(size_t elemSize, const PadParams &p, int64_t n, void *out, const void *in,
                      cudaStream_t stream) {
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  return visitWord(elemSize, [&](auto tag) {
    using W = typename decltype(tag)::type;
    padKernel<W><<<l.blocks, l.threads, 0, stream>>>(p, n, static_cast<W *>(out),
                                                     static_cast<const W *>(in));
    return launched();
  });
}

cudaError_t launchGather(size_t elemSize, const GatherParams &p, void *out, const void *data,
                         const void *indices, cudaStream_t stream) {
  int64_t n = p.pre * p.count * p.post;
  LaunchSize l = launchFor(n);
  if (!l.blocks)
    return cudaSuccess;
  return visitWord(elemSize, [&](auto tag) {
    using W = typename decltype(tag)::type;
    gatherKernel<W><<<l.blocks, l.threads, 0, stream>>>(p, n, static_cast<W *>(out),
                                                        static_cast<const W *>(data), indices);
    return launched();
  });
}

cudaError_t launchGatherGrad(const GatherParams &p, float *dx, const float *dy, const void *indices,
                             cudaStream_t stream) {
  LaunchSize l = launchFor(p.pre * p.post);
  if (!l.blocks || p.count == 0)
    return cudaSuccess;
  gatherGradKernel<<<l.blocks, l.threads, 0, stream>>>(p, dx, dy, indices);
  return launched();
}

} // namespace cuda
} // namespace graphc
