//===- LossScaleRule.h - The dynamic loss scale's update rule ----*- C++ -*-===//
//
// One definition of LossScaleStep's arithmetic for the host and CUDA device
// code (plain C++, no dependencies), so that every backend moves the scale
// alike. `check` is CheckFinite's mark (0: every gradient finite); `scale`,
// `good` and `skipped` are the three variables, updated in place; `decision`
// gets {apply (1 or 0), 1 / scale, skipped steps before this one}, the scale
// being the one this step's gradients were multiplied by.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Float16.h" // GRAPHC_HD, bitsOf

namespace graphc {

/// PyTorch's GradScaler default: 2000 finite steps before the scale doubles.
constexpr int kDefaultGrowthInterval = 2000;

/// CheckFinite's test: a value is an infinity or a NaN when its exponent
/// bits are all ones.
constexpr uint32_t kF32Exponent = 0x7f800000u, kF16Exponent = 0x7c00u, kBF16Exponent = 0x7f80u;

GRAPHC_HD void lossScaleStep(float check, float interval, float &scale, float &good,
                             float &skipped, float *decision) {
  bool finite = check == 0.0f;
  decision[0] = finite ? 1.0f : 0.0f;
  decision[1] = 1.0f / scale;
  decision[2] = skipped;
  if (finite) {
    good += 1.0f;
    if (good >= interval) {
      float grown = scale * 2.0f;
      if ((bitsOf(grown) & kF32Exponent) != kF32Exponent) // stays finite
        scale = grown;
      good = 0.0f;
    }
  } else {
    scale = scale * 0.5f < 1.0f ? 1.0f : scale * 0.5f;
    good = 0.0f;
    skipped += 1.0f;
  }
}

} // namespace graphc
