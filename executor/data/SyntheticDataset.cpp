//===- SyntheticDataset.cpp - Learnable generated samples -----------------===//
//
// Patterns are drawn once at construction (classes × C × 8 × 8 floats: 768 KB
// for 1000 RGB classes); a sample costs one pass over its pixels.
//
//===----------------------------------------------------------------------===//
#include "executor/data/SyntheticDataset.h"

#include "ir/Random.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace graphc {

namespace {
constexpr int64_t kGrid = 8;
// Keys that keep the pattern stream apart from every sample's noise stream.
constexpr uint64_t kPatternKey = 0x5041545445524e53ull;
constexpr float kInvSqrt2 = 0.70710678f;
} // namespace

SyntheticDataset::SyntheticDataset(SampleShape shape, int64_t samples, int64_t classes,
                                   uint64_t seed, Split split)
    : shape_(shape), samples_(samples), classes_(classes), seed_(seed), split_(split) {
  assert(shape.channels > 0 && shape.height > 0 && shape.width > 0 && samples > 0 && classes > 0);
  gridRows_ = std::min(kGrid, shape.height);
  gridCols_ = std::min(kGrid, shape.width);
  int64_t per = shape.channels * gridRows_ * gridCols_;
  patterns_.resize(classes * per);
  for (int64_t c = 0; c < classes; ++c) {
    RandomStream rng(seed, kPatternKey + (uint64_t)c);
    for (int64_t k = 0; k < per; ++k)
      patterns_[c * per + k] = (float)rng.normal() * kInvSqrt2;
  }
  rowCell_.resize(shape.height);
  for (int64_t y = 0; y < shape.height; ++y)
    rowCell_[y] = (int32_t)(y * gridRows_ / shape.height);
  // Column x lies in cell x·G/W: cell g covers [colStart_[g], colStart_[g + 1]).
  colStart_.assign(gridCols_ + 1, (int32_t)shape.width);
  for (int64_t x = shape.width - 1; x >= 0; --x)
    colStart_[x * gridCols_ / shape.width] = (int32_t)x;
}

std::string SyntheticDataset::describe() const {
  return "synthetic " + splitName(split_).str() + " (" + std::to_string(samples_) + " samples, " +
         std::to_string(classes_) + " classes, " + toString(shape_) + ", seed " +
         std::to_string(seed_) + ")";
}

Normalization SyntheticDataset::normalization() const {
  Normalization n;
  n.mean.assign(shape_.channels, 0.0f);
  n.std.assign(shape_.channels, 1.0f);
  return n;
}

llvm::ArrayRef<float> SyntheticDataset::pattern(int64_t label) const {
  int64_t per = shape_.channels * gridRows_ * gridCols_;
  return llvm::ArrayRef<float>(patterns_).slice(label * per, per);
}

llvm::Error SyntheticDataset::load(int64_t index, float *pixels, int64_t &label) const {
  assert(index >= 0 && index < samples_);
  label = index % classes_;
  const float *pat = pattern(label).data();
  // Train and test draw from disjoint keys: 2i and 2i + 1.
  RandomStream rng(seed_, 2 * (uint64_t)index + (split_ == Split::Test ? 1 : 0));
  // Four 16-bit uniforms per draw; u in [-1, 1) has variance 1/3.
  const float noiseScale = std::sqrt(3.0f) / 32768.0f * kInvSqrt2;
  const int64_t width = shape_.width, width4 = (width + 3) / 4 * 4;
  // One row of raw noise, then one pass per run of equal pattern values, so
  // both loops are simple enough to vectorise.
  std::vector<int16_t> noise(width4);
  float *out = pixels;
  for (int64_t c = 0; c < shape_.channels; ++c) {
    const float *patC = pat + c * gridRows_ * gridCols_;
    for (int64_t y = 0; y < shape_.height; ++y, out += width) {
      for (int64_t x = 0; x < width4; x += 4) {
        uint64_t bits = rng.next();
        std::memcpy(&noise[x], &bits, sizeof(bits));
      }
      const float *patRow = patC + rowCell_[y] * gridCols_;
      for (int64_t cell = 0; cell < gridCols_; ++cell) {
        const float p = patRow[cell];
        for (int64_t x = colStart_[cell]; x < colStart_[cell + 1]; ++x)
          out[x] = p + (float)noise[x] * noiseScale;
      }
    }
  }
  return llvm::Error::success();
}

} // namespace graphc
