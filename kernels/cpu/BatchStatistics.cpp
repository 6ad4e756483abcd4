//===- BatchStatistics.cpp - Per-channel batch mean and variance ----------===//
//
// One pass of sums and sums of squares in double: with float32 data the
// cancellation in E[x²] - E[x]² costs 2^-52 · mean²/variance, far below
// float32's own rounding unless a channel's mean is 10^6 of its spread.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/BatchStatistics.h"
#include "kernels/cpu/BlockedLayout.h"
#include "kernels/cpu/PlainLoops.h"
#include "kernels/cpu/TargetClones.h"

#include <algorithm>

namespace graphc {
namespace {

using plain::BFloat;

/// Channels one task sums, channels-last.
constexpr int64_t kChannelsPerTask = 32;

struct Sums {
  double sum = 0, squares = 0;
};

/// An element as a double (bf16 widens exactly).
inline double wide(float x) {
  return x;
}
inline double wide(BFloat x) {
  return plain::toFloat(x);
}

/// Adds a contiguous run of one channel.
template <typename T> GRAPHC_ALWAYS_INLINE void addRunLoop(const T *x, int64_t n, Sums &s) {
  double sum = 0, squares = 0;
#pragma omp simd reduction(+ : sum, squares)
  for (int64_t i = 0; i < n; ++i) {
    double v = wide(x[i]);
    sum += v;
    squares += v * v;
  }
  s.sum += sum;
  s.squares += squares;
}

/// Adds `rows` rows of `width` interleaved channels, `stride` elements
/// apart, lane by lane: nChw<B>c (width and stride B) or a run of NHWC's
/// channels (stride C).
template <typename T>
GRAPHC_ALWAYS_INLINE void addRowsLoop(const T *x, int64_t rows, int64_t width, int64_t stride,
                                      double *sum, double *squares) {
  for (int64_t r = 0; r < rows; ++r, x += stride)
#pragma omp simd
    for (int64_t b = 0; b < width; ++b) {
      double v = wide(x[b]);
      sum[b] += v;
      squares[b] += v * v;
    }
}

// The loops above for each element type, per ISA (kernels/cpu/TargetClones.h).
GRAPHC_ISA_CLONES(void, addRun, (const float *x, int64_t n, Sums &s), (x, n, s)) {
  addRunLoop(x, n, s);
}
GRAPHC_ISA_CLONES(void, addRun, (const BFloat *x, int64_t n, Sums &s), (x, n, s)) {
  addRunLoop(x, n, s);
}
GRAPHC_ISA_CLONES(void, addRows,
                  (const float *x, int64_t rows, int64_t width, int64_t stride, double *sum,
                   double *squares),
                  (x, rows, width, stride, sum, squares)) {
  addRowsLoop(x, rows, width, stride, sum, squares);
}
GRAPHC_ISA_CLONES(void, addRows,
                  (const BFloat *x, int64_t rows, int64_t width, int64_t stride, double *sum,
                   double *squares),
                  (x, rows, width, stride, sum, squares)) {
  addRowsLoop(x, rows, width, stride, sum, squares);
}

void finish(const Sums &s, int64_t count, float *mean, float *var) {
  double m = count ? s.sum / count : 0;
  *mean = (float)m;
  *var = count ? (float)std::max(0.0, s.squares / count - m * m) : 0.0f;
}

template <typename T> void statistics(const TensorView &x, const T *data, float *mean, float *var) {
  int64_t n = x.shape[0], c = x.shape[1], inner = x.numElements() / std::max<int64_t>(n * c, 1);
  if (x.layout != Layout::Plain) {
    // Runs of `width` channels: a block, or (channels-last) a slice of the
    // channels every pixel's row holds.
    const bool last = x.layout == Layout::ChannelsLast;
    int64_t width = last ? std::min<int64_t>(c, kChannelsPerTask) : channelBlock();
    int64_t runs = (c + width - 1) / width;
    plain::parallelFor(runs, 1, [&](int64_t first, int64_t end) {
      std::vector<double> sum(width), squares(width);
      for (int64_t cb = first; cb < end; ++cb) {
        int64_t c0 = cb * width, w = std::min(width, c - c0);
        std::fill(sum.begin(), sum.end(), 0.0);
        std::fill(squares.begin(), squares.end(), 0.0);
        if (last)
          addRows(data + c0, n * inner, w, c, sum.data(), squares.data());
        else
          for (int64_t i = 0; i < n; ++i)
            addRows(data + (i * runs + cb) * inner * width, inner, width, width, sum.data(),
                    squares.data());
        for (int64_t b = 0; b < w; ++b)
          finish({sum[b], squares[b]}, n * inner, mean + c0 + b, var + c0 + b);
      }
    });
    return;
  }
  plain::parallelFor(c, 1, [&](int64_t first, int64_t last) {
    for (int64_t ch = first; ch < last; ++ch) {
      Sums s;
      for (int64_t i = 0; i < n; ++i)
        addRun(data + (i * c + ch) * inner, inner, s);
      finish(s, n * inner, mean + ch, var + ch);
    }
  });
}

} // namespace

void batchStatistics(const TensorView &x, float *mean, float *var) {
  if (x.dtype == DType::BF16)
    statistics(x, x.as<BFloat>(), mean, var);
  else
    statistics(x, x.as<float>(), mean, var);
}

} // namespace graphc
