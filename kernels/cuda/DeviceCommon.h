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
//  - 16-bit float conversions (ir/Float16.h, the CPU's own);
//  - StridedIndex: a flat output index to one element offset per operand
//    (broadcast strides, negative strides for reversed slices);
//  - DeviceErrorWord: where kernels record bad data instead of faulting.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Float16.h" // GRAPHC_HD and the 16-bit float conversions

#include <cstdint>
#include <cstring>

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
