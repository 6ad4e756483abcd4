//===- ShapeConversion.cpp - Samples to the model's input shape -----------===//
//
// 3 → 1 in closed form: with raw v_c = x_c s_c + m_c, luminance L = Σ w_c v_c
// and its normalisation (L - Σ w_c m_c) / Σ w_c s_c, the means cancel and the
// result is Σ (w_c s_c / Σ_k w_k s_k) x_c.
//
//===----------------------------------------------------------------------===//
#include "executor/data/ShapeConversion.h"

#include "ir/Diagnostics.h"

#include <cstring>

namespace graphc {

namespace {
constexpr float kLuma[3] = {0.299f, 0.587f, 0.114f};
} // namespace

llvm::Expected<ShapeConversion> ShapeConversion::create(SampleShape from, const Normalization &norm,
                                                        SampleShape to) {
  if (from.channels <= 0 || from.height <= 0 || from.width <= 0 || to.channels <= 0 ||
      to.height <= 0 || to.width <= 0)
    return makeError("cannot convert samples of shape " + toString(from) + " to " + toString(to) +
                     ": every dimension must be positive");
  bool channelsOk = from.channels == to.channels || (from.channels == 1 && to.channels == 3) ||
                    (from.channels == 3 && to.channels == 1);
  if (!channelsOk)
    return makeError("cannot convert " + llvm::Twine(from.channels) + "-channel samples (" +
                     toString(from) + ") to " + llvm::Twine(to.channels) +
                     " channels: only equal counts, 1 -> 3 and 3 -> 1 are supported");
  ShapeConversion c;
  c.from_ = from;
  c.to_ = to;
  c.resize_ = planResize(from.height, from.width, to.height, to.width);
  if (from.channels == 3 && to.channels == 1) {
    assert(norm.std.size() == 3 && "a 3-channel data set gives 3 stds");
    float total = 0;
    for (int c3 = 0; c3 < 3; ++c3)
      total += kLuma[c3] * norm.std[c3];
    for (int c3 = 0; c3 < 3; ++c3)
      c.lumaWeights_.push_back(kLuma[c3] * norm.std[c3] / total);
  }
  return c;
}

void ShapeConversion::convert(const float *in, float *out, std::vector<float> &planeScratch,
                              std::vector<float> &resizeScratch) const {
  int64_t inPlane = from_.height * from_.width, outPlane = to_.height * to_.width;
  if (from_.channels == 3 && to_.channels == 1) {
    planeScratch.resize(inPlane);
    const float w0 = lumaWeights_[0], w1 = lumaWeights_[1], w2 = lumaWeights_[2];
    for (int64_t i = 0; i < inPlane; ++i)
      planeScratch[i] = w0 * in[i] + w1 * in[inPlane + i] + w2 * in[2 * inPlane + i];
    resizePlane(resize_, planeScratch.data(), out, resizeScratch);
    return;
  }
  if (from_.channels == 1 && to_.channels == 3) {
    resizePlane(resize_, in, out, resizeScratch);
    std::memcpy(out + outPlane, out, sizeof(float) * outPlane);
    std::memcpy(out + 2 * outPlane, out, sizeof(float) * outPlane);
    return;
  }
  for (int64_t c = 0; c < from_.channels; ++c)
    resizePlane(resize_, in + c * inPlane, out + c * outPlane, resizeScratch);
}

void toChannelsLast(const float *chw, float *hwc, const SampleShape &s) {
  const int64_t c = s.channels, hw = s.height * s.width;
  for (int64_t k = 0; k < c; ++k)
    for (int64_t p = 0; p < hw; ++p)
      hwc[p * c + k] = chw[k * hw + p];
}

} // namespace graphc
