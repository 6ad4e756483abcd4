//===- BatchNorm.cu - Batch norm's passes over the channels ---------------===//
//
// BatchNormDevice.h says what each pass computes and BatchNormPlan.h how the
// work is split and summed; here are the loads (16-byte chunks where the plan
// has them, 16-bit floats through the hardware conversions), the block trees
// in shared memory and the launches.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/BatchNormDevice.h"
#include "kernels/cuda/Dispatch.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace graphc {
namespace cuda {
namespace {

__device__ inline float loadF(const float *p) {
  return *p;
}
__device__ inline float loadF(const Half *p) {
  return __half2float(__ushort_as_half(p->bits));
}
__device__ inline float loadF(const BFloat *p) {
  return __bfloat162float(__ushort_as_bfloat16(p->bits));
}
__device__ inline void storeF(float *p, float v) {
  *p = v;
}
__device__ inline void storeF(Half *p, float v) {
  p->bits = __half_as_ushort(__float2half_rn(v));
}
__device__ inline void storeF(BFloat *p, float v) {
  p->bits = __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/// The words of a chunk's load: 8 or 16 bytes.
template <int Bytes> struct Word;
template <> struct Word<8> { using type = uint2; };
template <> struct Word<16> { using type = uint4; };

/// The V elements at base + off: one load where the chunk is kBnChunkBytes.
template <typename T, int V>
__device__ inline void loadChunk(const T *base, int64_t off, float (&out)[V]) {
  if constexpr (V * (int)sizeof(T) == kBnChunkBytes) {
    using W = typename Word<kBnChunkBytes>::type;
    W raw = *reinterpret_cast<const W *>(base + off);
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int k = 0; k < V; ++k)
      out[k] = loadF(e + k);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      out[k] = loadF(base + off + k);
  }
}

template <typename T, int V>
__device__ inline void storeChunk(T *base, int64_t off, const float (&in)[V]) {
  if constexpr (V * (int)sizeof(T) == kBnChunkBytes) {
    using W = typename Word<kBnChunkBytes>::type;
    W raw;
    T *e = reinterpret_cast<T *>(&raw);
#pragma unroll
    for (int k = 0; k < V; ++k)
      storeF(e + k, in[k]);
    *reinterpret_cast<W *>(base + off) = raw;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      storeF(base + off + k, in[k]);
  }
}

/// Statistics: (d, d^2) with d = x - K, K per element of the chunk.
template <typename T, int V> struct StatsTerm {
  const T *x;
  float pivot[V];
  __device__ void operator()(int64_t off, int64_t, float (&p)[V], float (&q)[V]) const {
    float v[V];
    loadChunk<T, V>(x, off, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      p[k] = v[k] - pivot[k];
      q[k] = p[k] * p[k];
    }
  }
};

/// Gradient: (dy', dy' * (x - mean)).
template <typename T, int V> struct GradTerm {
  const T *x, *dy, *y;
  float mean[V];
  __device__ void operator()(int64_t off, int64_t, float (&p)[V], float (&q)[V]) const {
    float xv[V], g[V], yv[V];
    loadChunk<T, V>(x, off, xv);
    loadChunk<T, V>(dy, off, g);
    if (y)
      loadChunk<T, V>(y, off, yv);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      p[k] = bnMaskedGradient(g[k], y != nullptr, y ? yv[k] : 0.0f);
      q[k] = p[k] * (xv[k] - mean[k]);
    }
  }
};

/// A block's kBnThreads sums in shared memory (raw: shared arrays take no
/// constructors).
__device__ inline BnSums *sharedSums() {
  __shared__ alignas(16) unsigned char raw[sizeof(BnSums) * kBnThreads];
  return reinterpret_cast<BnSums *>(raw);
}

/// The block's sums of each channel into partials (BatchNormPlan.h's tree
/// over the row lanes); every thread of the block calls it.
template <int V>
__device__ void writePartials(const BnPlan &p, const BnThreadWalk &w, const BnAccumulator<V> &acc,
                              BnSums *partials) {
  BnSums *sh = sharedSums();
  const int t = threadIdx.x, ty = t / p.lanes, tx = t % p.lanes;
  const int kinds = p.channelsLast ? V : 1;
#pragma unroll // constant indices keep the sums in registers
  for (int k = 0; k < V; ++k) {
    if (k >= kinds)
      break;
    sh[t] = w.active ? (p.channelsLast ? acc.sums[k] : acc.combined()) : BnSums();
    __syncthreads();
    for (int h = bnTreeTop(p.rowLanes); h >= 1; h /= 2) {
      if (w.active && ty < h && ty + h < p.rowLanes)
        sh[t].add(sh[t + h * p.lanes]);
      __syncthreads();
    }
    if (w.active && ty == 0)
      partials[w.tile * p.c + bnChunkChannel(p, w.channel, k)] = sh[tx];
    __syncthreads();
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(kBnThreads)
    statisticsKernel(BnPlan p, const T *x, BnSums *partials) {
  for (int64_t item = blockIdx.x; item < p.items(); item += gridDim.x) {
    BnThreadWalk w = bnWalk(p, item, threadIdx.x);
    StatsTerm<T, V> term{x, {}};
#pragma unroll
    for (int k = 0; k < V; ++k)
      term.pivot[k] = w.active ? loadF(x + bnOffset(p, 0, bnChunkChannel(p, w.channel, k))) : 0.0f;
    writePartials<V>(p, w, bnAccumulate<V>(p, w, term), partials);
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(kBnThreads)
    gradientSumsKernel(BnPlan p, const T *x, const T *dy, const T *y, const float *mean,
                       BnSums *partials) {
  for (int64_t item = blockIdx.x; item < p.items(); item += gridDim.x) {
    BnThreadWalk w = bnWalk(p, item, threadIdx.x);
    GradTerm<T, V> term{x, dy, y, {}};
#pragma unroll
    for (int k = 0; k < V; ++k)
      term.mean[k] = w.active ? mean[bnChunkChannel(p, w.channel, k)] : 0.0f;
    writePartials<V>(p, w, bnAccumulate<V>(p, w, term), partials);
  }
}

/// One block per channel: its tiles in the fixed order, then the tree.
template <typename T>
__global__ void __launch_bounds__(kBnThreads)
    mergeKernel(BnPlan p, bool statistics, float eps, const T *x, const float *var,
                const BnSums *partials, float *first, float *second) {
  BnSums *sh = sharedSums();
  const int t = threadIdx.x;
  const int count = p.tiles < kBnThreads ? (int)p.tiles : kBnThreads;
  for (int64_t c = blockIdx.x; c < p.c; c += gridDim.x) {
    BnSums s;
    for (int64_t k = t; k < p.tiles; k += kBnThreads)
      s.add(partials[k * p.c + c]);
    sh[t] = s;
    __syncthreads();
    for (int h = bnTreeTop(count); h >= 1; h /= 2) {
      if (t < h && t + h < count)
        sh[t].add(sh[t + h]);
      __syncthreads();
    }
    if (t == 0) {
      if (statistics)
        bnStatistics(sh[0], p.positions(), loadF(x + bnOffset(p, 0, c)), first[c], second[c]);
      else
        bnGradientSums(sh[0], var[c], eps, first[c], second[c]);
    }
    __syncthreads();
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(kBnThreads)
    forwardKernel(BnPlan p, float eps, bool relu, const T *x, const float *scale, const float *bias,
                  const float *mean, const float *var, T *y) {
  for (int64_t item = blockIdx.x; item < p.items(); item += gridDim.x) {
    BnThreadWalk w = bnWalk(p, item, threadIdx.x);
    if (!w.active)
      continue;
    BnForwardChannel ch[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      int64_t c = bnChunkChannel(p, w.channel, k);
      ch[k] = bnForwardChannel(scale[c], bias[c], mean[c], var[c], eps);
    }
    for (int64_t m = w.first; m < w.end; m += w.step) {
      int64_t off = bnOffset(p, m, w.channel);
      float v[V];
      loadChunk<T, V>(x, off, v);
#pragma unroll
      for (int k = 0; k < V; ++k)
        v[k] = bnForward(ch[k], relu, v[k]);
      storeChunk<T, V>(y, off, v);
    }
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(kBnThreads)
    backwardKernel(BnPlan p, float eps, const T *x, const T *dy, const T *y, const float *scale,
                   const float *mean, const float *var, const float *dscale, const float *dbias,
                   T *dx) {
  for (int64_t item = blockIdx.x; item < p.items(); item += gridDim.x) {
    BnThreadWalk w = bnWalk(p, item, threadIdx.x);
    if (!w.active)
      continue;
    BnBackwardChannel ch[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      int64_t c = bnChunkChannel(p, w.channel, k);
      ch[k] = bnBackwardChannel(scale[c], mean[c], var[c], dscale[c], dbias[c], eps, p.positions());
    }
    for (int64_t m = w.first; m < w.end; m += w.step) {
      int64_t off = bnOffset(p, m, w.channel);
      float xv[V], g[V], yv[V];
      loadChunk<T, V>(x, off, xv);
      loadChunk<T, V>(dy, off, g);
      if (y)
        loadChunk<T, V>(y, off, yv);
#pragma unroll
      for (int k = 0; k < V; ++k)
        xv[k] = bnBackward(ch[k], xv[k], bnMaskedGradient(g[k], y != nullptr, y ? yv[k] : 0.0f));
      storeChunk<T, V>(dx, off, xv);
    }
  }
}

unsigned blocksFor(int64_t items) {
  return (unsigned)(items < kMaxBlocks ? items : kMaxBlocks);
}

/// Calls f with the storage type and the plan's chunk width.
template <typename F> cudaError_t visitPlan(ElemType t, const BnPlan &p, F &&f) {
  return visitFloatType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int wide = kBnChunkBytes / sizeof(T);
    if (p.vec == wide)
      return f(Tag<T>{}, std::integral_constant<int, wide>{});
    return f(Tag<T>{}, std::integral_constant<int, 1>{});
  });
}

} // namespace

cudaError_t launchBatchNormStatistics(ElemType t, const BnPlan &p, const void *x, BnSums *partials,
                                      float *mean, float *var, cudaStream_t stream) {
  if (!p.items())
    return cudaSuccess;
  return visitPlan(t, p, [&](auto tag, auto vec) {
    using T = typename decltype(tag)::type;
    constexpr int V = decltype(vec)::value;
    statisticsKernel<T, V>
        <<<blocksFor(p.items()), kBnThreads, 0, stream>>>(p, static_cast<const T *>(x), partials);
    mergeKernel<T><<<blocksFor(p.c), kBnThreads, 0, stream>>>(
        p, true, 0.0f, static_cast<const T *>(x), nullptr, partials, mean, var);
    return launched();
  });
}

cudaError_t launchBatchNormForward(ElemType t, const BnPlan &p, float eps, bool relu, const void *x,
                                   const float *scale, const float *bias, const float *mean,
                                   const float *var, void *y, cudaStream_t stream) {
  if (!p.items())
    return cudaSuccess;
  return visitPlan(t, p, [&](auto tag, auto vec) {
    using T = typename decltype(tag)::type;
    constexpr int V = decltype(vec)::value;
    forwardKernel<T, V><<<blocksFor(p.items()), kBnThreads, 0, stream>>>(
        p, eps, relu, static_cast<const T *>(x), scale, bias, mean, var, static_cast<T *>(y));
    return launched();
  });
}

cudaError_t launchBatchNormGradientSums(ElemType t, const BnPlan &p, float eps, const void *x,
                                        const void *dy, const void *y, const float *mean,
                                        const float *var, BnSums *partials, float *dscale,
                                        float *dbias, cudaStream_t stream) {
  if (!p.items())
    return cudaSuccess;
  return visitPlan(t, p, [&](auto tag, auto vec) {
    using T = typename decltype(tag)::type;
    constexpr int V = decltype(vec)::value;
    gradientSumsKernel<T, V><<<blocksFor(p.items()), kBnThreads, 0, stream>>>(
        p, static_cast<const T *>(x), static_cast<const T *>(dy), static_cast<const T *>(y), mean,
        partials);
    mergeKernel<T><<<blocksFor(p.c), kBnThreads, 0, stream>>>(
        p, false, eps, static_cast<const T *>(x), var, partials, dscale, dbias);
    return launched();
  });
}

cudaError_t launchBatchNormBackward(ElemType t, const BnPlan &p, float eps, const void *x,
                                    const void *dy, const void *y, const float *scale,
                                    const float *mean, const float *var, const float *dscale,
                                    const float *dbias, void *dx, cudaStream_t stream) {
  if (!p.items())
    return cudaSuccess;
  return visitPlan(t, p, [&](auto tag, auto vec) {
    using T = typename decltype(tag)::type;
    constexpr int V = decltype(vec)::value;
    backwardKernel<T, V><<<blocksFor(p.items()), kBnThreads, 0, stream>>>(
        p, eps, static_cast<const T *>(x), static_cast<const T *>(dy), static_cast<const T *>(y),
        scale, mean, var, dscale, dbias, static_cast<T *>(dx));
    return launched();
  });
}

} // namespace cuda
} // namespace graphc
