//===- DeviceCommon.h - What CUDA device code and host code share -*- C++ -*-===//
//
// Plain C++ that compiles under both nvcc and the host compiler (no LLVM, no
// CUDA headers needed on the host side), so the element-level logic of the
// kernels (index arithmetic, dtype conversions, launch sizes) is one
// definition that the device runs and the host tests check:
//
//  - GRAPHC_HD marks functions callable on both sides;
//  - launchFor(): the grid of a grid-stride loop (capped block count; every
//    kernel walks 64-bit indices, so any tensor size is covered);
//  - 16-bit float conversions, bit for bit the CPU kernels' (round to nearest
//    even, NaN stays NaN), so Cast and the f16/bf16 paths agree with the CPU;
//  - StridedIndex: a flat output index to one element offset per operand
//    (broadcast strides, negative strides for reversed slices);
//  - DeviceErrorWord: where kernels record bad data instead of faulting.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GRAPHC_HD __host__ __device__ inline
#else
#define GRAPHC_HD inline
#endif

namespace graphc {

/// What a kernel records on the device when it meets bad data; the first
/// writer wins (site != 0). See CudaBackend::takeDeviceError.
struct DeviceErrorWord {
  int32_t site; ///< CudaBackend::registerErrorSite() id; 0: nothing recorded
  int32_t pad;
  int64_t index;  ///< where (a row, a position)
  int64_t value;  ///< what (the label, the index)
  uint64_t count; ///< elements that failed, all sites together
};

namespace cuda {

#if defined(__CUDACC__)
/// Records one bad element: counts it, and keeps it when it is the first.
__device__ inline void recordBadValue(DeviceErrorWord *w, int32_t site, int64_t index,
                                      int64_t value) {
  atomicAdd(reinterpret_cast<unsigned long long *>(&w->count), 1ull);
  if (atomicCAS(&w->site, 0, site) == 0) {
    w->index = index;
    w->value = value;
  }
}
#endif

/// Threads per block of the elementwise kernels.
inline constexpr int kThreads = 256;
/// Most blocks a grid-stride launch uses; more elements loop.
inline constexpr int64_t kMaxBlocks = 8192;
/// Most dimensions a StridedIndex holds (after merging contiguous axes).
inline constexpr int kMaxRank = 12;

struct LaunchSize {
  unsigned blocks = 0;
  unsigned threads = kThreads;
};

/// Blocks for `n` items with `threads` per block, each thread looping with a
/// grid stride; zero blocks for nothing to do (callers skip the launch).
inline LaunchSize launchFor(int64_t n, int threads = kThreads) {
  LaunchSize l;
  l.threads = (unsigned)threads;
  if (n <= 0)
    return l;
  int64_t blocks = (n + threads - 1) / threads;
  l.blocks = (unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks);
  return l;
}

//===-- 16-bit floats (the CPU's conversions, bit for bit) ----------------===//

GRAPHC_HD uint32_t bitsOf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
}
GRAPHC_HD float floatOf(uint32_t x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}

GRAPHC_HD float halfBitsToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return floatOf(bits);
}

GRAPHC_HD uint16_t floatToHalfBits(float f) {
  uint32_t x = bitsOf(f);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff)
    return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31)
    return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10)
      return (uint16_t)sign;
    mant |= 0x800000;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    ++half;
  return (uint16_t)half;
}

GRAPHC_HD float bf16BitsToFloat(uint16_t h) {
  return floatOf((uint32_t)h << 16);
}

GRAPHC_HD uint16_t floatToBf16Bits(float f) {
  uint32_t x = bitsOf(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/// Storage types of the 16-bit floats on the device.
struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};

/// Bool storage: one byte, read as `!= 0`.
struct Bool8 {
  uint8_t v;
};

GRAPHC_HD float toFloat(float x) {
  return x;
}
GRAPHC_HD float toFloat(Half h) {
  return halfBitsToFloat(h.bits);
}
GRAPHC_HD float toFloat(BFloat h) {
  return bf16BitsToFloat(h.bits);
}

template <typename T> struct FromFloat;
template <> struct FromFloat<float> {
  GRAPHC_HD static float get(float f) { return f; }
};
template <> struct FromFloat<Half> {
  GRAPHC_HD static Half get(float f) { return Half{floatToHalfBits(f)}; }
};
template <> struct FromFloat<BFloat> {
  GRAPHC_HD static BFloat get(float f) { return BFloat{floatToBf16Bits(f)}; }
};
template <typename T> GRAPHC_HD T fromFloat(float f) {
  return FromFloat<T>::get(f);
}

//===-- Strided indexing ---------------------------------------------------===//

/// An output of `rank` dims walked in row-major order; operand k is read at
/// base[k] + sum(index[d] * strides[k][d]) elements.
template <int Ops> struct StridedIndex {
  int rank = 1;
  int64_t dims[kMaxRank] = {1};
  int64_t strides[Ops][kMaxRank] = {};
  int64_t base[Ops] = {};

  GRAPHC_HD void offsets(int64_t flat, int64_t *off) const {
    for (int k = 0; k < Ops; ++k)
      off[k] = base[k];
    if (rank == 1) {
      for (int k = 0; k < Ops; ++k)
        off[k] += flat * strides[k][0];
      return;
    }
    for (int d = rank - 1; d >= 0; --d) {
      int64_t i = flat % dims[d];
      flat /= dims[d];
      for (int k = 0; k < Ops; ++k)
        off[k] += i * strides[k][d];
    }
  }
};

} // namespace cuda
} // namespace graphc
