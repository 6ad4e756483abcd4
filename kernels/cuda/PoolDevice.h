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
// atomics. MaxPoolGrad runs in two passes: each window's argmax into
// scratch (as the forward pass finds its maximum), then the gather compares
// those with the element's own position; recomputing every covering
// window's argmax per input element did k² loads per window instead of one.
//
// Layouts: each tensor plain (NCHW) or channels-last (NHWC), on its own
// (PoolParams' flags): an element is found by its plane (n * C + c) and its
// position in the plane in either, so a pool may read one layout and write
// the other. A loop's index walks the tensor it writes in stored order, so
// writes stay contiguous; MaxPoolGrad's argmax scratch follows dy's order.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

#include <cmath>

namespace graphc {
namespace cuda {

struct PoolParams {
  int64_t planes = 0; ///< N * C
  // Within a plane 32-bit arithmetic: integer division and remainder are
  // several times slower in 64 bits on a GPU, and a gradient element does a
  // few of each. poolParams refuses planes of 2^31 elements or more.
  int h = 0, w = 0;   ///< input
  int oh = 0, ow = 0; ///< output
  int kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  bool max = true;
  bool includePad = false;
  int64_t channels = 1; ///< C, to find an element of a channels-last tensor
  /// Channels-last: x (read), the output side (y written, or dy read) and
  /// dx (written).
  bool xLast = false, yLast = false, dxLast = false;
};

/// Element `e` of a tensor of `planes` planes of `size` positions, stored
/// NCHW or (`last`) NHWC: its plane (n * C + c) and position in the plane.
struct PoolAt {
  int64_t plane;
  int at;
};
GRAPHC_HD PoolAt poolDecode(bool last, int64_t channels, int size, int64_t e) {
  if (!last) {
    int64_t plane = e / size;
    return {plane, (int)(e - plane * size)};
  }
  int64_t pixel = e / channels, n = pixel / size;
  return {n * channels + (e - pixel * channels), (int)(pixel - n * size)};
}

/// Where (plane, at) of such a tensor lies.
GRAPHC_HD int64_t poolOffset(bool last, int64_t channels, int size, int64_t plane, int at) {
  if (!last)
    return plane * size + at;
  int64_t n = plane / channels;
  return (n * size + at) * channels + (plane - n * channels);
}

GRAPHC_HD int poolMin(int a, int b) {
  return a < b ? a : b;
}
GRAPHC_HD int poolMax(int a, int b) {
  return a > b ? a : b;
}

/// The divisor of average-pooling window (oh, ow).
GRAPHC_HD int poolDivisor(const PoolParams &p, int oh, int ow) {
  int hs = oh * p.sh - p.padTop, ws = ow * p.sw - p.padLeft;
  if (p.includePad)
    return (poolMin(hs + p.kh, p.h + p.padBottom) - hs) *
           (poolMin(ws + p.kw, p.w + p.padRight) - ws);
  return (poolMin(hs + p.kh, p.h) - poolMax(hs, 0)) * (poolMin(ws + p.kw, p.w) - poolMax(ws, 0));
}

/// The flat (h * w + col) input position of window (oh, ow)'s maximum in
/// plane `plane` of `x`, or -1 when the window holds no input element.
GRAPHC_HD int poolArgMax(const PoolParams &p, const float *x, int64_t plane, int oh, int ow) {
  int hs = oh * p.sh - p.padTop, ws = ow * p.sw - p.padLeft;
  int best = -1;
  float top = 0;
  for (int i = 0; i < p.kh; ++i) {
    int r = hs + i * p.dh;
    if (r < 0 || r >= p.h)
      continue;
    for (int j = 0; j < p.kw; ++j) {
      int c = ws + j * p.dw;
      if (c < 0 || c >= p.w)
        continue;
      float v = x[poolOffset(p.xLast, p.channels, p.h * p.w, plane, r * p.w + c)];
      if (best < 0 || v > top) {
        top = v;
        best = r * p.w + c;
      }
    }
  }
  return best;
}

/// Output element `e` (over planes * oh * ow, in the output side's stored
/// order): its plane and position in it.
struct PoolOutputAt {
  int64_t plane;
  int oh, ow;
};
GRAPHC_HD PoolOutputAt poolOutputAt(const PoolParams &p, int64_t e) {
  PoolAt o = poolDecode(p.yLast, p.channels, p.oh * p.ow, e);
  int oh = o.at / p.ow;
  return {o.plane, oh, o.at - oh * p.ow};
}

/// MaxPoolGrad's first pass: output element `e`'s window maximum, as a
/// position in its input plane (-1: the window holds no input element).
GRAPHC_HD int poolArgMaxAt(const PoolParams &p, const float *x, int64_t e) {
  PoolOutputAt o = poolOutputAt(p, e);
  return poolArgMax(p, x, o.plane, o.oh, o.ow);
}

/// Output element `e` (over planes * oh * ow).
GRAPHC_HD float poolForwardAt(const PoolParams &p, const float *x, int64_t e) {
  PoolOutputAt o = poolOutputAt(p, e);
  int oh = o.oh, ow = o.ow;
  if (p.max) {
    int best = poolArgMax(p, x, o.plane, oh, ow);
    return best < 0 ? -INFINITY : x[poolOffset(p.xLast, p.channels, p.h * p.w, o.plane, best)];
  }
  int hs = oh * p.sh - p.padTop, ws = ow * p.sw - p.padLeft;
  float sum = 0;
  for (int r = poolMax(hs, 0); r < poolMin(hs + p.kh, p.h); ++r)
    for (int c = poolMax(ws, 0); c < poolMin(ws + p.kw, p.w); ++c)
      sum += x[poolOffset(p.xLast, p.channels, p.h * p.w, o.plane, r * p.w + c)];
  int divisor = poolDivisor(p, oh, ow);
  return divisor > 0 ? sum / (float)divisor : 0.0f;
}

/// Calls visit(o) for each window o along one axis that covers input
/// position `pos`, in ascending order. Undilated windows are a range: o
/// covers pos when o * stride <= pos + pad <= o * stride + k - 1.
template <typename F>
GRAPHC_HD void coveringWindows(int pos, int pad, int k, int stride, int dilation, int outSize,
                               F visit) {
  int t = pos + pad;
  if (dilation == 1) {
    int first = t - k + 1 <= 0 ? 0 : (t - k + stride) / stride;
    int last = poolMin(t / stride, outSize - 1);
    for (int o = first; o <= last; ++o)
      visit(o);
    return;
  }
  for (int i = k - 1; i >= 0; --i) {
    int u = t - i * dilation;
    if (u < 0 || u % stride != 0)
      continue;
    int o = u / stride;
    if (o < outSize)
      visit(o);
  }
}

/// Input element `e` (over planes * h * w) of the gradient: the sum of the
/// output gradients of the windows that cover it; for max pooling those
/// whose maximum it is (`argmax`: poolArgMaxAt of every output element).
GRAPHC_HD float poolBackwardAt(const PoolParams &p, const int *argmax, const float *dy, int64_t e) {
  PoolAt i = poolDecode(p.dxLast, p.channels, p.h * p.w, e);
  int row = i.at / p.w, col = i.at - row * p.w;
  float sum = 0;
  coveringWindows(row, p.padTop, p.kh, p.sh, p.dh, p.oh, [&](int oh) {
    coveringWindows(col, p.padLeft, p.kw, p.sw, p.dw, p.ow, [&](int ow) {
      // argmax is in dy's order (one entry per output element).
      int64_t k = poolOffset(p.yLast, p.channels, p.oh * p.ow, i.plane, oh * p.ow + ow);
      if (p.max) {
        if (argmax[k] == i.at)
          sum += dy[k];
      } else {
        int divisor = poolDivisor(p, oh, ow);
        if (divisor > 0)
          sum += dy[k] / (float)divisor;
      }
    });
  });
  return sum;
}

cudaError_t launchPoolForward(const PoolParams &p, const float *x, float *y, cudaStream_t stream);
/// dx for MaxPoolGrad (x given; `argmax`: planes * oh * ow ints of scratch)
/// or AveragePoolGrad (x and argmax null).
cudaError_t launchPoolBackward(const PoolParams &p, const float *x, const float *dy, int *argmax,
                               float *dx, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
