//===- TargetClones.h - Hot loops compiled for several ISAs -----*- C++ -*-===//
//
// The project is built for baseline x86-64, so a plain C++ loop never uses
// more than SSE2. GRAPHC_ISA_CLONES defines a function compiled three times,
// for AVX-512, for AVX2 and for the baseline, and calls the one cpuIsa()
// chose (kernels/cpu/CpuIsa.h): the CPU's best, or lower under
// GRAPHC_CPU_ISA / ONEDNN_MAX_CPU_ISA, so every clone can be run and tested on
// a machine that has more. The body follows the macro:
//
//   GRAPHC_ISA_CLONES(void, addRow, (float *acc, const float *x, int64_t n), (acc, x, n)) {
//     for (int64_t i = 0; i < n; ++i)
//       acc[i] += x[i];
//   }
//
// The body is an always-inline function, so each clone compiles it with its
// own target; what the body calls is compiled for the baseline unless it is
// inlined too (keep bodies to loops over inline helpers). A template's
// instances are cloned by one macro per instance, each calling an
// always-inline template. The choice is a load and a branch per call, made
// once per contiguous run, never per element.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cpu/CpuIsa.h"

#define GRAPHC_ALWAYS_INLINE inline __attribute__((always_inline))

#if defined(__x86_64__)
#define GRAPHC_ISA_CLONES(Ret, Name, Params, Args)                                                 \
  static GRAPHC_ALWAYS_INLINE Ret Name##Body Params;                                               \
  __attribute__((target("avx512f"))) static Ret Name##Avx512 Params {                              \
    return Name##Body Args;                                                                        \
  }                                                                                                \
  __attribute__((target("avx2"))) static Ret Name##Avx2 Params {                                   \
    return Name##Body Args;                                                                        \
  }                                                                                                \
  static Ret Name##Default Params {                                                                \
    return Name##Body Args;                                                                        \
  }                                                                                                \
  Ret Name Params {                                                                                \
    switch (::graphc::cpuIsa()) {                                                                  \
    case ::graphc::CpuIsa::Avx512:                                                                 \
      return Name##Avx512 Args;                                                                    \
    case ::graphc::CpuIsa::Avx2:                                                                   \
      return Name##Avx2 Args;                                                                      \
    default:                                                                                       \
      return Name##Default Args;                                                                   \
    }                                                                                              \
  }                                                                                                \
  static GRAPHC_ALWAYS_INLINE Ret Name##Body Params
#else
#define GRAPHC_ISA_CLONES(Ret, Name, Params, Args) Ret Name Params
#endif
