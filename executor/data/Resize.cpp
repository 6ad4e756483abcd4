//===- Resize.cpp - Aspect-preserving bilinear resize and crop ------------===//
//
// Rows are filtered horizontally into a scratch block first (only the input
// rows the vertical filter reads), then the vertical pass runs along whole
// output rows so the inner loop is a contiguous multiply-add.
//
//===----------------------------------------------------------------------===//
#include "executor/data/Resize.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace graphc {

namespace {

/// Taps for `out` outputs of an axis scaled from `in` to `scaled` samples and
/// cropped from `offset`. Same arithmetic as PIL's and torch's antialiased
/// bilinear: centre (j + 0.5) · scale, triangle of half-width max(scale, 1).
AxisFilter planAxis(int64_t in, int64_t scaled, int64_t offset, int64_t out) {
  AxisFilter f;
  double scale = (double)in / (double)scaled;
  double support = std::max(scale, 1.0); // the triangle's half-width, in input samples
  f.taps = (int32_t)std::ceil(support) * 2 + 1;
  f.first.resize(out);
  f.count.resize(out);
  f.weights.assign(out * f.taps, 0.0f);
  std::vector<double> w(f.taps);
  for (int64_t i = 0; i < out; ++i) {
    double center = ((double)(i + offset) + 0.5) * scale;
    auto lo = std::max<int64_t>((int64_t)(center - support + 0.5), 0);
    auto hi = std::min<int64_t>((int64_t)(center + support + 0.5), in);
    assert(hi > lo && hi - lo <= f.taps);
    double total = 0;
    for (int64_t x = lo; x < hi; ++x) {
      double t = std::abs(((double)x - center + 0.5) / support);
      w[x - lo] = t < 1.0 ? 1.0 - t : 0.0;
      total += w[x - lo];
    }
    f.first[i] = (int32_t)lo;
    f.count[i] = (int32_t)(hi - lo);
    for (int64_t k = 0; k < hi - lo; ++k)
      f.weights[i * f.taps + k] = total > 0 ? (float)(w[k] / total) : 0.0f;
  }
  return f;
}

/// Python's round() of d / 2 (halves go to the even neighbour), as
/// torchvision's center_crop computes its offsets.
int64_t halfRoundedEven(int64_t d) {
  if (d % 2 == 0)
    return d / 2;
  int64_t k = d / 2;
  return k % 2 == 0 ? k : k + 1;
}

} // namespace

ResizePlan planResize(int64_t inHeight, int64_t inWidth, int64_t outHeight, int64_t outWidth) {
  assert(inHeight > 0 && inWidth > 0 && outHeight > 0 && outWidth > 0);
  ResizePlan p;
  p.inHeight = inHeight;
  p.inWidth = inWidth;
  p.outHeight = outHeight;
  p.outWidth = outWidth;
  // Height binds when outHeight / inHeight >= outWidth / inWidth.
  if (outHeight * inWidth >= outWidth * inHeight) {
    p.scaledHeight = outHeight;
    p.scaledWidth = std::max(outWidth, outHeight * inWidth / inHeight);
  } else {
    p.scaledWidth = outWidth;
    p.scaledHeight = std::max(outHeight, outWidth * inHeight / inWidth);
  }
  p.cropTop = halfRoundedEven(p.scaledHeight - outHeight);
  p.cropLeft = halfRoundedEven(p.scaledWidth - outWidth);
  p.rows = planAxis(inHeight, p.scaledHeight, p.cropTop, outHeight);
  p.cols = planAxis(inWidth, p.scaledWidth, p.cropLeft, outWidth);
  return p;
}

void resizePlane(const ResizePlan &plan, const float *in, float *out, std::vector<float> &scratch) {
  if (plan.isIdentity()) {
    std::memcpy(out, in, sizeof(float) * plan.outHeight * plan.outWidth);
    return;
  }
  const AxisFilter &rows = plan.rows, &cols = plan.cols;
  int64_t outH = plan.outHeight, outW = plan.outWidth, inW = plan.inWidth;
  // Input rows [r0, r1) are the ones the vertical filter reads.
  int64_t r0 = rows.first[0], r1 = r0;
  for (int64_t y = 0; y < outH; ++y)
    r1 = std::max<int64_t>(r1, rows.first[y] + rows.count[y]);
  scratch.resize((r1 - r0) * outW);

  for (int64_t r = r0; r < r1; ++r) {
    const float *src = in + r * inW;
    float *dst = scratch.data() + (r - r0) * outW;
    for (int64_t x = 0; x < outW; ++x) {
      const float *w = cols.weights.data() + x * cols.taps;
      const float *s = src + cols.first[x];
      float acc = 0;
      for (int32_t k = 0, n = cols.count[x]; k < n; ++k)
        acc += w[k] * s[k];
      dst[x] = acc;
    }
  }
  for (int64_t y = 0; y < outH; ++y) {
    float *dst = out + y * outW;
    const float *w = rows.weights.data() + y * rows.taps;
    const float *base = scratch.data() + (rows.first[y] - r0) * outW;
    float w0 = w[0];
    for (int64_t x = 0; x < outW; ++x)
      dst[x] = w0 * base[x];
    for (int32_t k = 1, n = rows.count[y]; k < n; ++k) {
      const float *s = base + k * outW;
      float wk = w[k];
      for (int64_t x = 0; x < outW; ++x)
        dst[x] += wk * s[x];
    }
  }
}

} // namespace graphc
