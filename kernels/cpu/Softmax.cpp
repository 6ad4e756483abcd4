//===- Softmax.cpp - Softmax, LogSoftmax and their gradients --------------===//
//
// Softmax and LogSoftmax {axis, default -1} on any axis, numerically stable
// (the row maximum is subtracted before exp; sums are kept in double).
// SoftmaxGrad(y, dy) = y * (dy - sum(dy * y)); LogSoftmaxGrad(y, dy) with y
// the log-probabilities = dy - exp(y) * sum(dy); sums along the axis.
//
// The tensor is viewed as [outer, L, inner] around the axis. The last axis
// (inner == 1) walks contiguous rows; another axis walks blocks of inner
// columns side by side, so every pass reads contiguous memory. f32 only.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/PlainLoops.h"

#include <cmath>

namespace graphc {
namespace {

using namespace plain;

/// Columns of a non-last axis handled together.
constexpr int64_t kColumns = 64;

enum class Kind { Softmax, LogSoftmax, SoftmaxGrad, LogSoftmaxGrad };

/// One [L, width] block with row stride `inner`; x and (for gradients) dy
/// are read, out written. acc holds one double per column.
template <Kind K>
void block(float *out, const float *x, const float *dy, int64_t len, int64_t inner, int64_t width) {
  double acc[kColumns];
  float top[kColumns];
  if constexpr (K == Kind::Softmax || K == Kind::LogSoftmax) {
    for (int64_t j = 0; j < width; ++j)
      top[j] = x[j];
    for (int64_t l = 1; l < len; ++l)
      for (int64_t j = 0; j < width; ++j)
        top[j] = std::max(top[j], x[l * inner + j]);
    for (int64_t j = 0; j < width; ++j)
      acc[j] = 0;
    for (int64_t l = 0; l < len; ++l)
      for (int64_t j = 0; j < width; ++j) {
        float e = std::exp(x[l * inner + j] - top[j]);
        acc[j] += e;
        if constexpr (K == Kind::Softmax)
          out[l * inner + j] = e;
      }
    if constexpr (K == Kind::Softmax) {
      for (int64_t j = 0; j < width; ++j)
        top[j] = (float)(1.0 / acc[j]);
      for (int64_t l = 0; l < len; ++l)
        for (int64_t j = 0; j < width; ++j)
          out[l * inner + j] *= top[j];
    } else {
      for (int64_t j = 0; j < width; ++j)
        top[j] += (float)std::log(acc[j]);
      for (int64_t l = 0; l < len; ++l)
        for (int64_t j = 0; j < width; ++j)
          out[l * inner + j] = x[l * inner + j] - top[j];
    }
  } else {
    // x is the forward output y.
    for (int64_t j = 0; j < width; ++j)
      acc[j] = 0;
    for (int64_t l = 0; l < len; ++l)
      for (int64_t j = 0; j < width; ++j) {
        if constexpr (K == Kind::SoftmaxGrad)
          acc[j] += (double)dy[l * inner + j] * x[l * inner + j];
        else
          acc[j] += dy[l * inner + j];
      }
    for (int64_t j = 0; j < width; ++j)
      top[j] = (float)acc[j];
    for (int64_t l = 0; l < len; ++l)
      for (int64_t j = 0; j < width; ++j) {
        int64_t i = l * inner + j;
        if constexpr (K == Kind::SoftmaxGrad)
          out[i] = x[i] * (dy[i] - top[j]);
        else
          out[i] = dy[i] - std::exp(x[i]) * top[j];
      }
  }
}

/// The last axis: one contiguous row of `len`.
template <Kind K> void row(float *out, const float *x, const float *dy, int64_t len) {
  if constexpr (K == Kind::Softmax || K == Kind::LogSoftmax) {
    float top = x[0];
    for (int64_t l = 1; l < len; ++l)
      top = std::max(top, x[l]);
    double sum = 0;
    for (int64_t l = 0; l < len; ++l) {
      float e = std::exp(x[l] - top);
      sum += e;
      if constexpr (K == Kind::Softmax)
        out[l] = e;
    }
    if constexpr (K == Kind::Softmax) {
      float inv = (float)(1.0 / sum);
      for (int64_t l = 0; l < len; ++l)
        out[l] *= inv;
    } else {
      float shift = top + (float)std::log(sum);
      for (int64_t l = 0; l < len; ++l)
        out[l] = x[l] - shift;
    }
  } else {
    double sum = 0;
    for (int64_t l = 0; l < len; ++l)
      sum += K == Kind::SoftmaxGrad ? (double)dy[l] * x[l] : (double)dy[l];
    float s = (float)sum;
    for (int64_t l = 0; l < len; ++l) {
      if constexpr (K == Kind::SoftmaxGrad)
        out[l] = x[l] * (dy[l] - s);
      else
        out[l] = dy[l] - std::exp(x[l]) * s;
    }
  }
}

template <Kind K> class SoftmaxKernel : public Kernel {
public:
  SoftmaxKernel(const Node &n, const KernelEnv &) {
    const TensorType &t = n.operand(0)->type();
    int64_t axis = n.attrs().getInt("axis", -1);
    if (axis < 0)
      axis += (int64_t)t.rank();
    outer_ = product(t.shape, 0, axis);
    len_ = t.shape[axis];
    inner_ = product(t.shape, axis + 1, t.rank());
  }

  llvm::Error run(KernelContext &ctx) override {
    if (outer_ * len_ * inner_ == 0)
      return llvm::Error::success();
    float *out = ctx.outputs[0].as<float>();
    const float *x = ctx.inputs[0].as<const float>();
    const float *dy = ctx.inputs.size() > 1 ? ctx.inputs[1].as<const float>() : nullptr;
    int64_t lo = len_, in = inner_;
    if (in == 1) {
      parallelFor(outer_, std::max<int64_t>(1, kGrain / lo), [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o)
          row<K>(out + o * lo, x + o * lo, dy ? dy + o * lo : nullptr, lo);
      });
      return llvm::Error::success();
    }
    int64_t blocksPerOuter = (in + kColumns - 1) / kColumns;
    int64_t work = outer_ * blocksPerOuter;
    parallelFor(work, std::max<int64_t>(1, kGrain / (lo * kColumns)), [&](int64_t b, int64_t e) {
      for (int64_t w = b; w < e; ++w) {
        int64_t o = w / blocksPerOuter, j = (w % blocksPerOuter) * kColumns;
        int64_t at = o * lo * in + j;
        block<K>(out + at, x + at, dy ? dy + at : nullptr, lo, in, std::min(kColumns, in - j));
      }
    });
    return llvm::Error::success();
  }

  // Every element is read before its own slot is written (sums come first),
  // so the result may overwrite x (forward) or dy (gradients).
  std::optional<unsigned> inPlaceOperand() const override {
    return K == Kind::SoftmaxGrad || K == Kind::LogSoftmaxGrad ? 1 : 0;
  }

private:
  int64_t outer_ = 0, len_ = 0, inner_ = 0;
};

} // namespace

void registerCpuSoftmaxKernels(KernelRegistry &r) {
  const auto cpu = DeviceKind::CPU;
  r.add(Op::Softmax, cpu, DType::F32, makeFactory<SoftmaxKernel<Kind::Softmax>>());
  r.add(Op::LogSoftmax, cpu, DType::F32, makeFactory<SoftmaxKernel<Kind::LogSoftmax>>());
  r.add(Op::SoftmaxGrad, cpu, DType::F32, makeFactory<SoftmaxKernel<Kind::SoftmaxGrad>>());
  r.add(Op::LogSoftmaxGrad, cpu, DType::F32, makeFactory<SoftmaxKernel<Kind::LogSoftmaxGrad>>());
}

} // namespace graphc
