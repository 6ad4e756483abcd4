//===- LayerNorm.cpp - Layer normalization and its gradient ---------------===//
//
// LayerNorm(x, scale[, bias]) {axis, epsilon} views x as [rows, D]: a row is
// one sample's axes from `axis` on, contiguous, normalised by its own mean
// and biased variance (PyTorch's layer_norm):
//   mean = sum(x) / D,  c = x - mean,  var = sum(c^2) / D,  rstd = 1 / sqrt(var + eps)
//   y = c * rstd * scale + bias
// Two passes rather than one sum of squares: E[x^2] - mean^2 cancels
// catastrophically when |mean| is large beside the spread. For the same
// reason the mean stays a double and c = x - mean is taken in double, then
// rounded once: a mean rounded to float is off by half an ulp of |mean|,
// which is the whole spread of values at 1000 +- 0.01 (PyTorch's float32
// layer_norm is 1e-2 off there; we are 1e-7).
// LayerNormGrad(x, scale, dy) -> dx, dscale, dbias computes the statistics
// again and, with xhat = (x - mean) * rstd and g = dy * scale,
//   dx     = rstd * (g - sum(g) / D - xhat * sum(g * xhat) / D)
//   dscale = sum over rows of dy * xhat,   dbias = sum over rows of dy.
// Every sum runs in double: row sums over a row, column sums over the rows in
// order (a block of columns per task), so no result depends on the thread
// count. f32 only: mixed precision has LayerNorm read f32
// (passes/MixedPrecision.h). The CUDA twin (kernels/cuda/LayerNormDevice.h)
// uses the same formulas in the same float steps.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/PlainLoops.h"

#include <cmath>

namespace graphc {
namespace {

using namespace plain;

/// Columns whose sums one task of the gradient keeps (on the stack).
constexpr int64_t kColumns = 64;

struct RowStats {
  double mean;
  float rstd;
};

/// x - mean, rounded once.
inline float centred(float x, const RowStats &s) {
  return (float)((double)x - s.mean);
}

RowStats rowStats(const float *x, int64_t d, float eps) {
  double sum = 0;
  for (int64_t j = 0; j < d; ++j)
    sum += x[j];
  RowStats s{sum / (double)d, 0};
  double squares = 0;
  for (int64_t j = 0; j < d; ++j) {
    float c = centred(x[j], s);
    squares += (double)c * c;
  }
  const float var = (float)(squares / (double)d);
  s.rstd = 1.0f / std::sqrt(var + eps);
  return s;
}

/// The [rows, D] view of a LayerNorm's x and its attributes.
struct RowShape {
  int64_t rows = 0, d = 0;
  float eps = 1e-5f;

  explicit RowShape(const Node &n) {
    const TensorType &t = n.operand(0)->type();
    int64_t axis = n.attrs().getInt("axis", -1);
    if (axis < 0)
      axis += (int64_t)t.rank();
    rows = product(t.shape, 0, axis);
    d = product(t.shape, axis, t.rank());
    eps = (float)n.attrs().getFloat("epsilon", 1e-5);
  }
  /// Rows per parallel task: about a grain of elements.
  int64_t rowGrain() const { return std::max<int64_t>(1, kGrain / std::max<int64_t>(d, 1)); }
};

class LayerNormKernel : public Kernel {
public:
  LayerNormKernel(const Node &n, const KernelEnv &) : shape_(n), hasBias_(n.numOperands() == 3) {}

  llvm::Error run(KernelContext &ctx) override {
    const int64_t d = shape_.d;
    if (shape_.rows * d == 0)
      return llvm::Error::success();
    const float *x = ctx.inputs[0].as<const float>();
    const float *scale = ctx.inputs[1].as<const float>();
    const float *bias = hasBias_ ? ctx.inputs[2].as<const float>() : nullptr;
    float *y = ctx.outputs[0].as<float>();
    parallelFor(shape_.rows, shape_.rowGrain(), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        RowStats s = rowStats(xr, d, shape_.eps);
        if (bias) {
          for (int64_t j = 0; j < d; ++j)
            yr[j] = centred(xr[j], s) * s.rstd * scale[j] + bias[j];
        } else {
          for (int64_t j = 0; j < d; ++j)
            yr[j] = centred(xr[j], s) * s.rstd * scale[j];
        }
      }
    });
    return llvm::Error::success();
  }

  // A row's statistics are read before any of its elements is written.
  std::optional<unsigned> inPlaceOperand() const override { return 0; }

private:
  RowShape shape_;
  bool hasBias_;
};

class LayerNormGradKernel : public Kernel {
public:
  LayerNormGradKernel(const Node &n, const KernelEnv &) : shape_(n) {}

  size_t scratchBytes() const override { return (size_t)shape_.rows * sizeof(RowStats); }

  llvm::Error run(KernelContext &ctx) override {
    const int64_t rows = shape_.rows, d = shape_.d;
    const float *x = ctx.inputs[0].as<const float>();
    const float *scale = ctx.inputs[1].as<const float>();
    const float *dy = ctx.inputs[2].as<const float>();
    float *dx = ctx.outputs[0].as<float>();
    float *dscale = ctx.outputs[1].as<float>();
    float *dbias = ctx.outputs[2].as<float>();
    auto *stats = static_cast<RowStats *>(ctx.scratch);
    parallelFor(rows, shape_.rowGrain(), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        stats[r] = rowStats(x + r * d, d, shape_.eps);
    });
    // The column sums come before dx, which may overwrite dy.
    int64_t blocks = (d + kColumns - 1) / kColumns;
    parallelFor(blocks, std::max<int64_t>(1, kGrain / std::max<int64_t>(rows * kColumns, 1)),
                [&](int64_t begin, int64_t end) {
                  for (int64_t b = begin; b < end; ++b)
                    columnSums(x, dy, stats, b * kColumns, std::min(kColumns, d - b * kColumns),
                               dscale, dbias);
                });
    parallelFor(rows, shape_.rowGrain(), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        rowGradient(x + r * d, dy + r * d, scale, stats[r], dx + r * d);
    });
    return llvm::Error::success();
  }

  std::optional<unsigned> inPlaceOperand() const override { return 2; }

private:
  /// dscale and dbias of columns [j0, j0 + width).
  void columnSums(const float *x, const float *dy, const RowStats *stats, int64_t j0, int64_t width,
                  float *dscale, float *dbias) const {
    double sumScale[kColumns] = {}, sumBias[kColumns] = {};
    for (int64_t r = 0; r < shape_.rows; ++r) {
      const float *xr = x + r * shape_.d + j0, *dyr = dy + r * shape_.d + j0;
      const RowStats s = stats[r];
      for (int64_t j = 0; j < width; ++j) {
        float xhat = centred(xr[j], s) * s.rstd;
        sumScale[j] += (double)dyr[j] * xhat;
        sumBias[j] += dyr[j];
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      dscale[j0 + j] = (float)sumScale[j];
      dbias[j0 + j] = (float)sumBias[j];
    }
  }

  void rowGradient(const float *x, const float *dy, const float *scale, RowStats s,
                   float *dx) const {
    const int64_t d = shape_.d;
    double sumG = 0, sumGXhat = 0;
    for (int64_t j = 0; j < d; ++j) {
      float g = dy[j] * scale[j];
      sumG += g;
      sumGXhat += (double)g * (centred(x[j], s) * s.rstd);
    }
    const float meanG = (float)(sumG / (double)d), meanGXhat = (float)(sumGXhat / (double)d);
    for (int64_t j = 0; j < d; ++j) {
      float xhat = centred(x[j], s) * s.rstd;
      dx[j] = s.rstd * (dy[j] * scale[j] - meanG - xhat * meanGXhat);
    }
  }

  RowShape shape_;
};

} // namespace

void registerCpuLayerNormKernels(KernelRegistry &r) {
  r.add(Op::LayerNorm, DeviceKind::CPU, DType::F32, makeFactory<LayerNormKernel>());
  r.add(Op::LayerNormGrad, DeviceKind::CPU, DType::F32, makeFactory<LayerNormGradKernel>());
}

} // namespace graphc
