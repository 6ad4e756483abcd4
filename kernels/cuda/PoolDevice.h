//===- PoolDevice.h - 2-d pooling: element bodies and launchers --*- C++ -*-===//
//
// Max and average pooling over [N, C, H, W] with asymmetric pads, ceil_mode
// (the output size says how many windows there are) and, for max pooling,
// dilations; the semantics of the CPU twin (PyTorch's):
//  - max: the first maximum in row-major window order wins (ties, and the
//    gradient's argmax); padding never wins;
//  - average, count_include_pad=1: divide by the part of the window inside
//    the explicitly padded input (a ceil_mode window may overhang it);
//    count_include_pad=0: divide by the part inside the input.
// Gradients are gathers, not scatters: each input element sums over the
// windows that cover it, in window order, so they are deterministic without
// atomics (MaxPoolGrad recomputes each covering window's argmax).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

#include <cmath>

namespace graphc {
namespace cuda {

struct PoolParams {
  int64_t planes = 0;     ///< N * C
  int64_t h = 0, w = 0;   ///< input
  int64_t oh = 0, ow = 0; ///< output
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  bool max = true;
  bool includePad = false;
};

GRAPHC_HD int64_t poolMin(int64_t a, int64_t b) {
  return a < b ? a : b;
}
GRAPHC_HD int64_t poolMax(int64_t a, int64_t b) {
  return a > b ? a : b;
}

/// The divisor of average-pooling window (oh, ow).
GRAPHC_HD int64_t poolDivisor(const PoolParams &p, int64_t oh, int64_t ow) {
  int64_t hs = oh * p.sh - p.padTop, ws = ow * p.sw - p.padLeft;
  if (p.includePad)
    return (poolMin(hs + p.kh, p.h + p.padBottom) - hs) *
           (poolMin(ws + p.kw, p.w + p.padRight) - ws);
  return (poolMin(hs + p.kh, p.h) - poolMax(hs, 0)) * (poolMin(ws + p.kw, p.w) - poolMax(ws, 0));
}

/// The flat (h * w + col) input position of window (oh, ow)'s maximum in
/// plane `x`, or -1 when the window holds no input element.
GRAPHC_HD int64_t poolArgMax(const PoolParams &p, const float *x, int64_t oh, int64_t ow) {
  int64_t hs = oh * p.sh - p.padTop, ws = ow * p.sw - p.padLeft;
  int64_t best = -1;
  float top = 0;
  for (int64_t i = 0; i < p.kh; ++i) {
    int64_t r = hs + i * p.dh;
    if (r < 0 || r >= p.h)
      continue;
    for (int64_t j = 0; j < p.kw; ++j) {
      int64_t c = ws + j * p.dw;
      if (c < 0 || c >= p.w)
        continue;
      float v = x[r * p.w + c];
      if (best < 0 || v > top) {
        top = v;
        best = r * p.w + c;
      }
    }
  }
  return best;
}

/// Output element `e` (over planes * oh * ow).
GRAPHC_HD float poolForwardAt(const PoolParams &p, const float *x, int64_t e) {
  int64_t ow = e % p.ow, t = e / p.ow;
  int64_t oh = t % p.oh, plane = t / p.oh;
  const float *in = x + plane * p.h * p.w;
  if (p.max) {
    int64_t at = poolArgMax(p, in, oh, ow);
    return at < 0 ? -INFINITY : in[at];
  }
  int64_t hs = oh * p.sh - p.padTop, ws = ow * p.sw - p.padLeft;
  float sum = 0;
  for (int64_t r = poolMax(hs, 0); r < poolMin(hs + p.kh, p.h); ++r)
    for (int64_t c = poolMax(ws, 0); c < poolMin(ws + p.kw, p.w); ++c)
      sum += in[r * p.w + c];
  int64_t divisor = poolDivisor(p, oh, ow);
  return divisor > 0 ? sum / (float)divisor : 0.0f;
}

/// Calls visit(o) for each window o along one axis that covers input
/// position `pos`, in ascending order.
template <typename F>
GRAPHC_HD void coveringWindows(int64_t pos, int64_t pad, int64_t k, int64_t stride,
                               int64_t dilation, int64_t outSize, F visit) {
  for (int64_t i = k - 1; i >= 0; --i) {
    int64_t t = pos + pad - i * dilation;
    if (t < 0 || t % stride != 0)
      continue;
    int64_t o = t / stride;
    if (o < outSize)
      visit(o);
  }
}

/// Input element `e` (over planes * h * w) of the gradient: the sum of the
/// output gradients of the windows that cover it.
GRAPHC_HD float poolBackwardAt(const PoolParams &p, const float *x, const float *dy, int64_t e) {
  int64_t col = e % p.w, t = e / p.w;
  int64_t row = t % p.h, plane = t / p.h;
  const float *in = x ? x + plane * p.h * p.w : nullptr;
  const float *g = dy + plane * p.oh * p.ow;
  float sum = 0;
  coveringWindows(row, p.padTop, p.kh, p.sh, p.dh, p.oh, [&](int64_t oh) {
    coveringWindows(col, p.padLeft, p.kw, p.sw, p.dw, p.ow, [&](int64_t ow) {
      if (p.max) {
        if (poolArgMax(p, in, oh, ow) == row * p.w + col)
          sum += g[oh * p.ow + ow];
      } else {
        int64_t divisor = poolDivisor(p, oh, ow);
        if (divisor > 0)
          sum += g[oh * p.ow + ow] / (float)divisor;
      }
    });
  });
  return sum;
}

cudaError_t launchPoolForward(const PoolParams &p, const float *x, float *y, cudaStream_t stream);
/// dx for MaxPoolGrad (x given) or AveragePoolGrad (x null).
cudaError_t launchPoolBackward(const PoolParams &p, const float *x, const float *dy, float *dx,
                               cudaStream_t stream);

} // namespace cuda
} // namespace graphc
