//===- PlainLoops.h - Loops the plain C++ CPU kernels share ------*- C++ -*-===//
//
// The building blocks of the kernels that do not go through oneDNN:
//
//  - parallelFor: contiguous ranges, one per thread of the device's OpenMP
//    budget, and no threads at all below a grain size (tiny tensors run on the
//    calling thread, so a step with thousands of small nodes does not pay for
//    thread wake-ups).
//  - stridedCopy: a LoopNest (kernels/LoopNest.h, shared with the CUDA
//    kernels) walked in parallel, as runs of memcpy or transposing tiles.
//  - Half and BFloat: 16-bit storage computed in f32 (callers convert short
//    chunks into a float buffer and reuse the f32 loop).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h"
#include "kernels/Kernel.h"
#include "kernels/LoopNest.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cstring>
#include <omp.h>
#include <type_traits>

namespace graphc {
namespace plain {

/// Elements below which an elementwise loop stays on the calling thread.
inline constexpr int64_t kGrain = 1 << 15;

/// Calls f(begin, end) on disjoint ranges covering [0, n); in parallel when
/// n is at least two grains and the thread budget allows.
template <typename F> void parallelFor(int64_t n, int64_t grain, F &&f) {
  if (n <= 0)
    return;
  int64_t threads = std::min<int64_t>(omp_get_max_threads(), n / std::max<int64_t>(grain, 1));
  if (threads <= 1 || omp_in_parallel()) {
    f(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads((int)threads)
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end)
      f(begin, end);
  }
}

//===-- 16-bit floats ------------------------------------------------------===//

struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};

template <typename T>
inline constexpr bool isHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat>;

inline float toFloat(float x) {
  return x;
}
inline float toFloat(Half h) {
  return halfBitsToFloat(h.bits);
}
inline float toFloat(BFloat h) {
  return bf16BitsToFloat(h.bits);
}
template <typename T> T fromFloat(float f);
template <> inline float fromFloat<float>(float f) {
  return f;
}
template <> inline Half fromFloat<Half>(float f) {
  return Half{floatToHalfBits(f)};
}
template <> inline BFloat fromFloat<BFloat>(float f) {
  return BFloat{floatToBf16Bits(f)};
}

/// Floats per chunk when a 16-bit tensor is computed in f32 (on the stack).
inline constexpr int64_t kChunk = 512;

/// bf16 to f32 and back over contiguous runs, compiled for AVX-512 and AVX2
/// (kernels/cpu/TargetClones.h): the conversions of every bf16 elementwise op.
void bf16ToFloats(float *to, const BFloat *from, int64_t n);
void floatsToBf16(BFloat *to, const float *from, int64_t n);
/// acc[i] += from[i].
void addBf16(float *acc, const BFloat *from, int64_t n);
/// ReLU and its gradient on bf16 bits, without converting: what the f32
/// functors compute (NaN and -0 pass through ReLU; the gradient passes dy
/// where y > 0).
void reluBf16(BFloat *o, const BFloat *x, int64_t n);
void reluGradBf16(BFloat *o, const BFloat *y, const BFloat *dy, int64_t n);

/// Reads n elements (or one, when stride is 0) into floats.
template <typename T> void loadFloats(float *to, const T *from, int64_t stride, int64_t n) {
  if (stride == 0)
    n = 1;
  if constexpr (std::is_same_v<T, BFloat>) {
    if (stride == 1)
      return bf16ToFloats(to, from, n);
  }
  for (int64_t i = 0; i < n; ++i)
    to[i] = toFloat(from[i * stride]);
}
template <typename T> void storeFloats(T *to, const float *from, int64_t n) {
  if constexpr (std::is_same_v<T, BFloat>)
    return floatsToBf16(to, from, n);
  for (int64_t i = 0; i < n; ++i)
    to[i] = fromFloat<T>(from[i]);
}

//===-- Dispatch on dtype --------------------------------------------------===//

template <typename T> struct TypeTag { using type = T; };

/// Calls f(TypeTag<T>{}) for the storage type of a float dtype.
template <typename F> void visitFloat(DType t, F &&f) {
  switch (t) {
  case DType::F16:
    return f(TypeTag<Half>{});
  case DType::BF16:
    return f(TypeTag<BFloat>{});
  default:
    assert(t == DType::F32 && "not a float dtype");
    return f(TypeTag<float>{});
  }
}

/// Float dtypes plus i64 and i32 (arithmetic on shapes).
template <typename F> void visitNumeric(DType t, F &&f) {
  switch (t) {
  case DType::I64:
    return f(TypeTag<int64_t>{});
  case DType::I32:
    return f(TypeTag<int32_t>{});
  default:
    return visitFloat(t, f);
  }
}

//===-- Strided copies ----------------------------------------------------===//

/// Copies a strided source into a contiguous destination, for elements of
/// `elemSize` bytes: out[i] = in[nest offset of operand 0 at i]. Parallel
/// over large outputs.
void stridedCopy(void *out, const void *in, const LoopNest &nest, size_t elemSize);

/// Whether every input and output of a kernel arrives in the same layout.
bool sameLayout(const KernelContext &ctx);

} // namespace plain
} // namespace graphc
