//===- Winograd1dAvx512.cpp - The 1-D Winograd's vector code for AVX-512 ---===//
//
// Compiled with -mavx512f (kernels/CMakeLists.txt); reached only on a CPU
// whose channel block is 16 floats, i.e. where oneDNN computes in AVX-512.
// Includes nothing with external inline code (Winograd1dIsa.h says why).
//
//===----------------------------------------------------------------------===//

#if defined(__x86_64__)

#include "kernels/cpu/Winograd1dTiles.h"

#include <immintrin.h>

namespace graphc {
namespace wino1d {
namespace {

/// 16 floats; 6 x 4 accumulators of 32 registers.
struct Avx512 {
  using V = __m512;
  static constexpr int B = 16, R = 6, NV = 4;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float *p) { return _mm512_loadu_ps(p); }
  static void store(float *p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
};

} // namespace

const IsaKernels &avx512Kernels() {
  static const IsaKernels kernels = kernelsOf<Avx512>("avx512");
  return kernels;
}

} // namespace wino1d
} // namespace graphc

#endif // __x86_64__
