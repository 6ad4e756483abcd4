//===- ConvBenchCommon.h - What the convolution benchmarks share -*- C++ -*-===//
//
// bench/conv_bench.cpp (graphrun's kernels) and bench/conv_formats.cpp
// (oneDNN's, by activation format) time the same inception_v3 (299x299) and
// resnet18 (224x224) convolution shapes, take the same basic options and time
// each computation the same way.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cpu/CpuBackend.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace graphc {
namespace bench {

struct Shape {
  const char *name;
  int64_t c, hw, o, kh, kw, stride, padH, padW;
  int64_t batch = 0; ///< 0: the --batch option
};

// Input channels and size as they reach each layer in inception_v3 (299x299), then resnet18's.
inline constexpr Shape kShapes[] = {
    {"Conv2d_1a_3x3", 3, 299, 32, 3, 3, 2, 0, 0},
    {"Conv2d_2b_3x3", 32, 147, 64, 3, 3, 1, 1, 1},
    {"Conv2d_4a_3x3", 80, 73, 192, 3, 3, 1, 0, 0},
    {"Mixed_5b/branch5x5_2", 48, 35, 64, 5, 5, 1, 2, 2},
    {"Mixed_5b/branch3x3dbl_3", 96, 35, 96, 3, 3, 1, 1, 1},
    {"Mixed_6a/branch3x3", 288, 35, 384, 3, 3, 2, 0, 0},
    {"Mixed_6b/branch7x7_2", 128, 17, 128, 1, 7, 1, 0, 3},
    {"Mixed_6b/branch7x7_3", 128, 17, 192, 7, 1, 1, 3, 0},
    {"Mixed_6c/branch7x7dbl_2", 160, 17, 160, 7, 1, 1, 3, 0},
    {"Mixed_6e/branch7x7_2", 192, 17, 192, 1, 7, 1, 0, 3},
    {"Mixed_7b/branch1x1", 1280, 8, 320, 1, 1, 1, 0, 0},
    {"Mixed_7b/branch3x3_2a", 384, 8, 384, 1, 3, 1, 0, 1},
    {"Mixed_7b/branch3x3dbl_2", 448, 8, 384, 3, 3, 1, 1, 1},
    // resnet18's 3x3 stride-1 convolutions (224x224 input).
    {"resnet18/layer1", 64, 56, 64, 3, 3, 1, 1, 1},
    {"resnet18/layer2", 128, 28, 128, 3, 3, 1, 1, 1},
    {"resnet18/layer3", 256, 14, 256, 3, 3, 1, 1, 1},
    {"resnet18/layer4", 512, 7, 512, 3, 3, 1, 1, 1},
    // The probe oneDNN was measured with when the toolchain was chosen (N=32), for calibration.
    {"probe_N32", 64, 35, 64, 3, 3, 1, 1, 1, 32},
};

/// The options both programs take.
struct CommonOptions {
  int64_t batch = 16;
  int threads = 0;
  double minSeconds = 0.3;
  const char *only = "";
};

/// Parses `--flag value` pairs: CommonOptions' into `o`, the program's own
/// through `o.take(flag, value)` (false: not one of them), then applies
/// --threads. For a flag neither takes, a flag without a value or a batch
/// below 1, prints `o.usage` and returns false.
template <class Options> bool parseOptions(int argc, char **argv, Options &o) {
  bool ok = argc % 2 == 1;
  for (int i = 1; ok && i + 1 < argc; i += 2) {
    const char *flag = argv[i], *value = argv[i + 1];
    if (!std::strcmp(flag, "--batch"))
      o.batch = std::atoll(value);
    else if (!std::strcmp(flag, "--threads"))
      o.threads = std::atoi(value);
    else if (!std::strcmp(flag, "--min-seconds"))
      o.minSeconds = std::atof(value);
    else if (!std::strcmp(flag, "--only"))
      o.only = value;
    else
      ok = o.take(flag, value);
  }
  if (!ok || o.batch < 1) {
    std::fprintf(stderr, "usage: %s\n", Options::usage);
    return false;
  }
  if (o.threads > 0)
    setCpuThreads(o.threads);
  return true;
}

/// The best seconds of `run()` (false: failed) on the clock `now()`: at least
/// three runs and `minSeconds` in all, not counting the first (it warms caches
/// and page tables); negative when a run failed.
template <class Run, class Now> double bestSeconds(Run &&run, Now &&now, double minSeconds) {
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 3 || total < minSeconds; ++rep) {
    const double start = now();
    if (!run())
      return -1;
    const double s = now() - start;
    if (rep > 0) {
      best = s < best ? s : best;
      total += s;
    }
  }
  return best;
}

} // namespace bench
} // namespace graphc
