//===- ShapeConversion.h - Samples to the model's input shape ----*- C++ -*-===//
//
// Converts one normalised sample from a data set's native shape to the
// model's input shape:
//   - channels: equal counts pass through; 1 → 3 replicates the normalised
//     grey plane (what models pretrained on RGB are usually fed); 3 → 1 takes
//     the luminance (ITU-R 601: 0.299 R + 0.587 G + 0.114 B) of the raw
//     intensities and normalises it with the luminance of the per-channel
//     means and stds, which works out to a fixed weighted sum of the
//     normalised channels. Any other pair is an error.
//   - height and width: the aspect-preserving resize and centre crop of
//     Resize.h, applied to each plane (after 3 → 1, before 1 → 3, so the
//     resize always runs on as few planes as possible).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/data/Dataset.h"
#include "executor/data/Resize.h"

namespace graphc {

class ShapeConversion {
public:
  static llvm::Expected<ShapeConversion> create(SampleShape from, const Normalization &norm,
                                                SampleShape to);

  bool isIdentity() const { return from_ == to_; }
  SampleShape from() const { return from_; }
  SampleShape to() const { return to_; }

  /// `in` has from().numElements() floats, `out` to().numElements(). The
  /// scratch vectors belong to the calling thread and are reused.
  void convert(const float *in, float *out, std::vector<float> &planeScratch,
               std::vector<float> &resizeScratch) const;

private:
  SampleShape from_, to_;
  ResizePlan resize_;
  llvm::SmallVector<float, 3> lumaWeights_; // 3 → 1 only
};

/// A sample of shape `s` from [C, H, W] to [H, W, C] (a channels-last model input).
void toChannelsLast(const float *chw, float *hwc, const SampleShape &s);

} // namespace graphc
