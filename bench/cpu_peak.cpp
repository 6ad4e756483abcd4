//===- cpu_peak.cpp - Peak arithmetic rates of this CPU's vector units ------===//
//
// Times long chains of independent vector multiply-adds on every thread and
// prints GFLOP/s: the ceiling a kernel's GFLOP/s (graphrun's --profile,
// conv_bench) is read against.
//
//   cpu_peak [--threads T] [--seconds S]
//
//  - f32 FMA, AVX2 (vfmadd, 8 floats) and AVX-512 (16 floats): 2 FLOP per lane;
//  - bf16 dot products, AVX512_BF16 (vdpbf16ps: each f32 lane adds two bf16
//    products): 4 FLOP per f32 lane, the rate --precision bf16's convolutions
//    run at on a CPU without AMX.
//
// A unit this CPU lacks is reported as such, not timed.
//
//===----------------------------------------------------------------------===//

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

/// Independent accumulators per thread: more than the multiply-add latency
/// times the units that issue them, so the chains never wait on each other.
constexpr int kChains = 12;
constexpr long kRounds = 1 << 20;

// Each kernel runs kRounds rounds of kChains multiply-adds and returns the
// sum of the chains' first lanes, so none is optimized away.

/// A kernel of f32 FMAs: the vector type Vec of Lanes floats, its intrinsics'
/// prefix (_mm256, _mm512), compiled for Target alone. (A macro: each must be
/// its own function with its own target, so no wider instruction reaches the
/// narrower one.)
#define GRAPHC_FMA_CHAINS(Name, Target, Vec, Prefix, Lanes)                                        \
  __attribute__((target(Target))) float Name() {                                                   \
    Vec acc[kChains];                                                                              \
    for (int i = 0; i < kChains; ++i)                                                              \
      acc[i] = Prefix##_set1_ps(1e-3f * (float)i);                                                 \
    const Vec a = Prefix##_set1_ps(0.9999f), b = Prefix##_set1_ps(1e-4f);                          \
    for (long n = 0; n < kRounds; ++n)                                                             \
      _Pragma("GCC unroll 12") for (int i = 0; i < kChains; ++i) acc[i] =                          \
          Prefix##_fmadd_ps(a, acc[i], b);                                                         \
    float out[Lanes], sum = 0;                                                                     \
    for (int i = 0; i < kChains; ++i) {                                                            \
      Prefix##_storeu_ps(out, acc[i]);                                                             \
      sum += out[0];                                                                               \
    }                                                                                              \
    return sum;                                                                                    \
  }

GRAPHC_FMA_CHAINS(fmaAvx2, "avx2,fma", __m256, _mm256, 8)
GRAPHC_FMA_CHAINS(fmaAvx512, "avx512f", __m512, _mm512, 16)

__attribute__((target("avx512f,avx512bf16"))) float dotBf16() {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i)
    acc[i] = _mm512_set1_ps(1e-3f * (float)i);
  // Pairs of bf16 (1.0, 0.5) and (1e-4, 1e-4), as 32-bit lanes.
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f003f80);
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x38d238d2);
  for (long n = 0; n < kRounds; ++n)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i)
      acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  float out[16], sum = 0;
  for (int i = 0; i < kChains; ++i) {
    _mm512_storeu_ps(out, acc[i]);
    sum += out[0];
  }
  return sum;
}

struct Unit {
  const char *name;
  bool present;
  float (*run)();
  double flopsPerRound; ///< one round of kChains instructions
};

/// GFLOP/s of `u` on `threads` threads: the best of runs over `seconds`.
double measure(const Unit &u, int threads, double seconds) {
  using Clock = std::chrono::steady_clock;
  double best = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    std::vector<std::thread> pool;
    std::vector<float> sinks(threads);
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { sinks[t] = u.run(); });
    for (std::thread &th : pool)
      th.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (sinks[0] == 1234.5f) // never true; keeps the results live
      std::puts("");
    best = std::max(best, threads * (double)kRounds * u.flopsPerRound / s / 1e9);
  } while (Clock::now() < end);
  return best;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: cpu_peak [--threads T] [--seconds S]\n");
  std::exit(2);
}

} // namespace

int main(int argc, char **argv) {
  int threads = (int)std::max(1u, std::thread::hardware_concurrency());
  double seconds = 1.0;
  for (int i = 1; i < argc; ++i) {
    char *end = nullptr;
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = (int)std::strtol(argv[++i], &end, 10);
      if (*end || threads < 1)
        usage();
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::strtod(argv[++i], &end);
      if (*end || !(seconds > 0))
        usage();
    } else {
      usage();
    }
  }
  __builtin_cpu_init();
  const Unit units[] = {
      {"f32 FMA, AVX2 (8 lanes)", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
       fmaAvx2, kChains * 8.0 * 2},
      {"f32 FMA, AVX-512 (16 lanes)", (bool)__builtin_cpu_supports("avx512f"), fmaAvx512,
       kChains * 16.0 * 2},
      {"bf16 dot, AVX512_BF16 (vdpbf16ps)",
       __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"), dotBf16,
       kChains * 16.0 * 4},
  };
  std::printf("cpu: %s, %d threads\n", cpuModel().c_str(), threads);
  for (const Unit &u : units) {
    if (u.present)
      std::printf("  %-36s %8.1f GFLOP/s\n", u.name, measure(u, threads, seconds));
    else
      std::printf("  %-36s not on this CPU\n", u.name);
  }
  return 0;
}
