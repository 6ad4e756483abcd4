//===- TargetClones.h - Hot loops compiled for several ISAs -----*- C++ -*-===//
//
// GRAPHC_TARGET_CLONES on a function compiles it for AVX-512, AVX2 and the
// baseline, and the loader picks one for the CPU at hand (an ifunc). The
// project is built for baseline x86-64, so without it a plain C++ loop never
// uses more than SSE2. Sanitizer builds take the baseline only: an ifunc's
// resolver runs while the program is being loaded, before the sanitizer
// runtime is up, and its instrumented code crashes there.
//
//===----------------------------------------------------------------------===//
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                        \
    __has_feature(memory_sanitizer)
#define GRAPHC_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GRAPHC_SANITIZED 1
#endif

#if defined(GRAPHC_SANITIZED) || !defined(__x86_64__)
#define GRAPHC_TARGET_CLONES
#else
#define GRAPHC_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
