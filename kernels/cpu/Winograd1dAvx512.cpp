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

// GCC 12's _mm512_max_ps hands its builtin an undefined vector that the full
// mask then ignores; -Wmaybe-uninitialized reports it where it is inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace graphc {
namespace wino1d {
namespace {

/// 16 floats; 6 x 4 accumulators of 32 registers.
GRAPHC_WINO_VECTOR(Avx512, __m512, _mm512, 16, 6, 4);

} // namespace

const IsaKernels &avx512Kernels() {
  static const IsaKernels kernels = kernelsOf<Avx512>("avx512");
  return kernels;
}

} // namespace wino1d
} // namespace graphc

#endif // __x86_64__
