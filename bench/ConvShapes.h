//===- ConvShapes.h - The convolutions the CPU benchmarks time -*- C++ -*-===//
//
// inception_v3's (299x299) and resnet18's (224x224) convolution shapes that
// bench/conv_bench.cpp (graphrun's kernels) and bench/conv_formats.cpp
// (oneDNN's, by activation format) both time.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

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

} // namespace bench
} // namespace graphc
