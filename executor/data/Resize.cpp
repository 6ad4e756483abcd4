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
  double scale = (double)in / (double)scaled;
  double support = std::max(scale, 1.0); // the triangle's half-width, in input samples
  std::vector<int64_t> lo(out), hi(out);
  AxisFilter f;
  for (int64_t i = 0; i < out; ++i) {
    double center = ((double)(i + offset) + 0.5) * scale;
    lo[i] = std::max<int64_t>((int64_t)(center - support + 0.5), 0);
    hi[i] = std::min<int64_t>((int64_t)(center + support + 0.5), in);
    assert(hi[i] > lo[i]);
    f.taps = std::max<int32_t>(f.taps, (int32_t)(hi[i] - lo[i]));
  }
  // Every output gets the same number of taps (zero weights pad the shorter
  // windows): a fixed trip count keeps the inner loops free of mispredicted
  // branches. Windows near the end start earlier to stay inside the axis.
  f.first.resize(out);
  f.weights.assign(out * f.taps, 0.0f);
  std::vector<double> w(f.taps);
  for (int64_t i = 0; i < out; ++i) {
    double center = ((double)(i + offset) + 0.5) * scale, total = 0;
    for (int64_t x = lo[i]; x < hi[i]; ++x) {
      double t = std::abs(((double)x - center + 0.5) / support);
      w[x - lo[i]] = t < 1.0 ? 1.0 - t : 0.0;
      total += w[x - lo[i]];
    }
    int64_t start = std::min<int64_t>(lo[i], in - f.taps);
    f.first[i] = (int32_t)start;
    for (int64_t k = 0; k < hi[i] - lo[i]; ++k)
      f.weights[i * f.taps + (lo[i] - start) + k] = total > 0 ? (float)(w[k] / total) : 0.0f;
  }
  return f;
}

/// One row through the horizontal filter; TAPS > 0 fixes the trip count at
/// compile time so the dot product unrolls (the hot loop of image loading).
template <int TAPS>
void filterRow(const AxisFilter &cols, const float *src, float *dst, int64_t outW) {
  const int taps = TAPS > 0 ? TAPS : cols.taps;
  const float *w = cols.weights.data();
  for (int64_t x = 0; x < outW; ++x, w += taps) {
    const float *s = src + cols.first[x];
    float acc = 0;
    for (int k = 0; k < taps; ++k)
      acc += w[k] * s[k];
    dst[x] = acc;
  }
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
    r1 = std::max<int64_t>(r1, rows.first[y] + rows.taps);
  scratch.resize((r1 - r0) * outW);

  using RowFilter = void (*)(const AxisFilter &, const float *, float *, int64_t);
  static constexpr RowFilter kUnrolled[] = {&filterRow<0>, &filterRow<1>, &filterRow<2>,
                                            &filterRow<3>, &filterRow<4>, &filterRow<5>,
                                            &filterRow<6>, &filterRow<7>, &filterRow<8>};
  RowFilter filter = cols.taps <= 8 ? kUnrolled[cols.taps] : &filterRow<0>;
  for (int64_t r = r0; r < r1; ++r)
    filter(cols, in + r * inW, scratch.data() + (r - r0) * outW, outW);
  for (int64_t y = 0; y < outH; ++y) {
    float *dst = out + y * outW;
    const float *w = rows.weights.data() + y * rows.taps;
    const float *base = scratch.data() + (rows.first[y] - r0) * outW;
    float w0 = w[0];
    for (int64_t x = 0; x < outW; ++x)
      dst[x] = w0 * base[x];
    for (int32_t k = 1; k < rows.taps; ++k) {
      const float *s = base + k * outW;
      float wk = w[k];
      for (int64_t x = 0; x < outW; ++x)
        dst[x] += wk * s[x];
    }
  }
}

} // namespace graphc
