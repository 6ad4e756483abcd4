//===- Winograd1dAvx2.cpp - The 1-D Winograd's vector code for AVX2 + FMA --===//
//
// Compiled with -mavx2 -mfma (kernels/CMakeLists.txt); reached only on a CPU
// that has both and whose channel block is 8 floats (an AVX2 CPU, or any
// under ONEDNN_MAX_CPU_ISA=AVX2). Includes nothing with external inline code
// (Winograd1dIsa.h says why).
//
//===----------------------------------------------------------------------===//

#if defined(__x86_64__)

#include "kernels/cpu/Winograd1dTiles.h"

#include <immintrin.h>

namespace graphc {
namespace wino1d {
namespace {

/// 8 floats; 6 x 2 accumulators of 16 registers.
struct Avx2 {
  using V = __m256;
  static constexpr int B = 8, R = 6, NV = 2;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float *p) { return _mm256_loadu_ps(p); }
  static void store(float *p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
};

} // namespace

const IsaKernels &avx2Kernels() {
  static const IsaKernels kernels = kernelsOf<Avx2>("avx2");
  return kernels;
}

} // namespace wino1d
} // namespace graphc

#endif // __x86_64__
