//===- Float16.h - IEEE half and bfloat16 conversions ----------*- C++ -*-===//
//
// The 16-bit float conversions every backend uses, one definition for the host
// (Tensor, the CPU kernels) and for CUDA device code (kernels/cuda includes it
// through DeviceCommon.h), so that Cast and the f16/bf16 paths agree bit for
// bit: round to nearest even, overflow to infinity, NaN stays a (quiet) NaN.
// Plain C++ with no dependencies, compiled by nvcc and the host compiler.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstring>

#ifndef GRAPHC_HD
#if defined(__CUDACC__)
#define GRAPHC_HD __host__ __device__ inline
#else
#define GRAPHC_HD inline
#endif
#endif

namespace graphc {

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

/// Branch-free (a select), so loops over chunks vectorise.
GRAPHC_HD uint16_t floatToBf16Bits(float f) {
  uint32_t x = bitsOf(f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  uint32_t quiet = (x >> 16) | 0x40u;
  return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

} // namespace graphc
