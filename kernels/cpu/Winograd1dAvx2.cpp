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
GRAPHC_WINO_VECTOR(Avx2, __m256, _mm256, 8, 6, 2);

} // namespace

const IsaKernels &avx2Kernels() {
  static const IsaKernels kernels = kernelsOf<Avx2>("avx2");
  return kernels;
}

} // namespace wino1d
} // namespace graphc

#endif // __x86_64__
