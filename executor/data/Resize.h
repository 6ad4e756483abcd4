//===- Resize.h - Aspect-preserving bilinear resize and crop -----*- C++ -*-===//
//
// The one resize policy of the input pipeline, used for image files and for
// samples whose height and width differ from the model's input:
//
//   1. scale the image, keeping its aspect ratio, to the smallest size that
//      covers the target (for a square target: the shorter side becomes the
//      target side, the longer one floor(side · long / short)),
//   2. cut the target out of the middle (offsets rounded as Python's round()).
//
// For a square target this is torchvision's Resize(side) + CenterCrop(side).
// The resampling is separable antialiased bilinear (a triangle filter widened
// by the downscale factor, as PIL's BILINEAR and torch's interpolate with
// antialias=True), computed in float with no intermediate rounding, and only
// for the output pixels inside the crop.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

namespace graphc {

/// Filter taps of one axis: output i reads input[first[i] + k] with weight
/// weights[i * taps + k] for k < taps; weights of an output sum to 1.
struct AxisFilter {
  std::vector<int32_t> first;
  std::vector<float> weights;
  int32_t taps = 0;
};

struct ResizePlan {
  int64_t inHeight = 0, inWidth = 0, outHeight = 0, outWidth = 0;
  /// The size the image is scaled to before the crop, and the crop's corner.
  int64_t scaledHeight = 0, scaledWidth = 0, cropTop = 0, cropLeft = 0;
  AxisFilter rows, cols;

  bool isIdentity() const { return inHeight == outHeight && inWidth == outWidth; }
};

/// Plans the resize of an inHeight × inWidth plane to outHeight × outWidth.
ResizePlan planResize(int64_t inHeight, int64_t inWidth, int64_t outHeight, int64_t outWidth);

/// Resizes one plane (row-major floats). `scratch` is reused between calls.
void resizePlane(const ResizePlan &plan, const float *in, float *out, std::vector<float> &scratch);

} // namespace graphc
