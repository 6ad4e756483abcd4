//===- SyntheticDataset.h - Learnable generated samples ----------*- C++ -*-===//
//
// The default data of `graphrun train`: no files, any shape, any number of
// classes, and still learnable, so a model's loss falls within tens of steps.
//
// Each class has a fixed random pattern: a G×G grid of normal values per
// channel (G = 8, or less for tiny images), stretched over the image as
// constant blocks. Sample i has label i mod classes and pixels
//   (pattern[label] + noise) / sqrt(2),   noise uniform with unit variance,
// so pixels have zero mean and unit variance (the normalisation is the
// identity). Patterns depend on the seed only; the noise of sample i depends
// on (seed, split, i), so the test split shows the same classes with fresh
// noise. Generation is one xoshiro draw per four pixels, written straight into
// the caller's buffer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/data/Dataset.h"

#include <vector>

namespace graphc {

class SyntheticDataset : public Dataset {
public:
  /// Sizes must be positive (openDataset checks user input).
  SyntheticDataset(SampleShape shape, int64_t samples, int64_t classes, uint64_t seed, Split split);

  std::string describe() const override;
  int64_t size() const override { return samples_; }
  int64_t numClasses() const override { return classes_; }
  SampleShape shape() const override { return shape_; }
  Normalization normalization() const override;
  llvm::Error load(int64_t index, float *pixels, int64_t &label) const override;

  /// Grid cells per side of the class patterns.
  int64_t gridRows() const { return gridRows_; }
  int64_t gridCols() const { return gridCols_; }
  /// The pattern of a class, C×G×G (already divided by sqrt(2)).
  llvm::ArrayRef<float> pattern(int64_t label) const;

private:
  SampleShape shape_;
  int64_t samples_, classes_;
  uint64_t seed_;
  Split split_;
  int64_t gridRows_, gridCols_;
  std::vector<float> patterns_;   // classes × C × gridRows × gridCols
  std::vector<int32_t> rowCell_;  // pixel row → grid row
  std::vector<int32_t> colStart_; // grid column → its first pixel column
};

} // namespace graphc
