//===- LayerNormDevice.h - Layer norm's kernels ------------------*- C++ -*-===//
//
// LayerNorm and LayerNormGrad on x viewed as [rows, D] (a row: one sample's
// normalised axes, contiguous), f32, with the CPU kernel's formulas
// (kernels/cpu/LayerNorm.cpp) in the same float steps:
//   mean = sum(x) / D (a double), c = x - mean (in double, rounded once),
//   var = sum(c^2) / D, rstd = 1 / sqrt(var + eps)
//   y  = c * rstd * scale + bias
//   dx = rstd * (dy * scale - sum(g) / D - xhat * sum(g * xhat) / D),
//        g = dy * scale, xhat = c * rstd
//   dscale = sum over rows of dy * xhat, dbias = sum over rows of dy.
// Row sums are one block's (kLnThreads threads): thread t adds elements
// t, t + T, t + 2T, ... in double, then a fixed tree halves the partials
// (round h = T/2 ... 1: lane t < h adds lane t + h). Column sums are one
// thread's per column, over the rows in order, in double. Both orders depend
// on the shapes alone, so results repeat bit for bit from run to run; the
// host tests run these bodies (lnRowSumsAsBlock, lnColumnSums) against the
// CPU kernel.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/ElementwiseDevice.h"

#include <cuda_runtime_api.h>

namespace graphc {
namespace cuda {

/// Threads of a row block (a power of two).
inline constexpr int kLnThreads = 256;

/// Two sums carried together (the gradient's row needs both at once).
struct LnSums {
  double a = 0, b = 0;
  GRAPHC_HD void add(const LnSums &o) {
    a += o.a;
    b += o.b;
  }
};

struct LnStats {
  double mean;
  float rstd;
};

GRAPHC_HD double lnMean(double sum, int64_t d) {
  return sum / (double)d;
}
GRAPHC_HD float lnCentred(float x, double mean) {
  return (float)((double)x - mean);
}
GRAPHC_HD float lnRstd(double squares, int64_t d, float eps) {
  float var = (float)(squares / (double)d);
  return 1.0f / mathSqrt(var + eps);
}
GRAPHC_HD float lnXhat(float x, LnStats s) {
  return lnCentred(x, s.mean) * s.rstd;
}
GRAPHC_HD float lnForward(float x, LnStats s, float scale, float bias) {
  return lnCentred(x, s.mean) * s.rstd * scale + bias;
}
/// dx of one element; meanG = sum(g) / D, meanGXhat = sum(g * xhat) / D.
GRAPHC_HD float lnBackward(float x, float dy, float scale, LnStats s, float meanG,
                           float meanGXhat) {
  return s.rstd * (dy * scale - meanG - lnXhat(x, s) * meanGXhat);
}

/// The terms of the row sums: x; (x - mean)^2; and g, g * xhat.
struct LnValueTerm {
  const float *x;
  GRAPHC_HD LnSums operator()(int64_t j) const { return {(double)x[j], 0.0}; }
};
struct LnSquareTerm {
  const float *x;
  double mean;
  GRAPHC_HD LnSums operator()(int64_t j) const {
    float c = lnCentred(x[j], mean);
    return {(double)c * c, 0.0};
  }
};
struct LnGradTerm {
  const float *x, *dy, *scale;
  LnStats s;
  GRAPHC_HD LnSums operator()(int64_t j) const {
    float g = dy[j] * scale[j];
    return {(double)g, (double)g * lnXhat(x[j], s)};
  }
};

/// Thread `lane`'s part of a row sum.
template <typename Term> GRAPHC_HD LnSums lnLaneSums(const Term &term, int64_t d, int lane) {
  LnSums s;
  for (int64_t j = lane; j < d; j += kLnThreads)
    s.add(term(j));
  return s;
}

/// One round of the block's tree over kLnThreads partials.
GRAPHC_HD void lnTreeRound(LnSums *partials, int h, int lane) {
  if (lane < h)
    partials[lane].add(partials[lane + h]);
}

/// dscale (a) and dbias (b) of column j: its rows in order.
GRAPHC_HD LnSums lnColumnSums(const float *x, const float *dy, const LnStats *stats, int64_t rows,
                              int64_t d, int64_t j) {
  LnSums s;
  for (int64_t r = 0; r < rows; ++r) {
    float g = dy[r * d + j];
    s.add({(double)g * lnXhat(x[r * d + j], stats[r]), (double)g});
  }
  return s;
}

/// A row sum as a block computes it, on the host (the tests' emulation).
template <typename Term> LnSums lnRowSumsAsBlock(const Term &term, int64_t d) {
  LnSums partials[kLnThreads];
  for (int t = 0; t < kLnThreads; ++t)
    partials[t] = lnLaneSums(term, d, t);
  for (int h = kLnThreads / 2; h >= 1; h /= 2)
    for (int t = 0; t < kLnThreads; ++t)
      lnTreeRound(partials, h, t);
  return partials[0];
}

/// y of x (y may be x).
cudaError_t launchLayerNormForward(int64_t rows, int64_t d, float eps, const float *x,
                                   const float *scale, const float *bias, float *y,
                                   cudaStream_t stream);

/// dx, dscale, dbias; `stats` holds `rows` entries of scratch; dx may be dy.
cudaError_t launchLayerNormBackward(int64_t rows, int64_t d, float eps, const float *x,
                                    const float *scale, const float *dy, LnStats *stats, float *dx,
                                    float *dscale, float *dbias, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
