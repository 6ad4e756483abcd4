//===- Loss.cpp - The loss op (cross-entropy, NLL, MSE) and its gradient --===//
//
// SoftmaxCrossEntropy {scale, loss} is the loss op add-loss creates; `loss`
// says which (passes/AddLoss.h):
//   absent (softmax cross-entropy), logits [B, C], labels [B]:
//     scale * sum over rows of (logsumexp(row) - row[label]);
//     gradient dloss * scale * (softmax(row) - onehot(label)).
//   "nll", log-probabilities [B, C], labels [B]:
//     scale * sum over rows of -row[label]; gradient -dloss * scale * onehot.
//   "mse", output [B, ...], targets of its type:
//     scale * sum over elements of (x - t)^2; gradient 2 * dloss * scale * (x - t).
// scale absent means the mean: 1/B (1/elements for mse); an empty batch
// gives 0, so an empty tower contributes nothing. The log-sum-exp subtracts
// the row maximum and sums in double; the squared errors sum in double.
//
// Labels (i64 or i32) are checked first: one outside [0, C) is an error that
// names the node, the row and the label. Per-row losses are summed in row
// order, so the loss does not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "ir/Modes.h"
#include "kernels/cpu/PlainLoops.h"

#include <algorithm>
#include <cmath>

namespace graphc {
namespace {

using namespace plain;

/// Rows and the values per row (classes, or an MSE row's elements).
struct LossShape {
  LossKind kind = LossKind::CrossEntropy;
  int64_t rows = 0, classes = 0;
  double scale = 1;
  explicit LossShape(const Node &n) {
    const TensorType &x = n.operand(0)->type();
    kind = llvm::cantFail(parseLossKind(n.attrs().getString("loss", "cross-entropy")));
    rows = x.shape[0];
    classes = rows ? x.numElements() / rows : 0;
    const int64_t meanOver = kind == LossKind::Mse ? rows * classes : rows;
    scale = n.attrs().getFloat("scale", meanOver ? 1.0 / (double)meanOver : 0.0);
  }
  int64_t grain() const { return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, classes)); }
};

/// Labels as i64 in `out`; an error names the first bad one.
llvm::Error readLabels(const Node &n, const TensorView &labels, int64_t classes, int64_t *out) {
  bool wide = labels.dtype == DType::I64;
  for (int64_t b = 0, rows = labels.numElements(); b < rows; ++b) {
    int64_t v = wide ? labels.as<const int64_t>()[b] : labels.as<const int32_t>()[b];
    if (v < 0 || v >= classes)
      return nodeError(n, "label " + llvm::Twine(v) + " in row " + llvm::Twine(b) +
                              " is outside [0, " + llvm::Twine(classes) + ")");
    out[b] = v;
  }
  return llvm::Error::success();
}

/// Row maximum and log(sum(exp(x - max))).
std::pair<float, double> logSumExp(const float *x, int64_t n) {
  float top = x[0];
  for (int64_t c = 1; c < n; ++c)
    top = std::max(top, x[c]);
  double sum = 0;
  for (int64_t c = 0; c < n; ++c)
    sum += std::exp(x[c] - top);
  return {top, std::log(sum)};
}

class SoftmaxCrossEntropyKernel : public Kernel {
public:
  SoftmaxCrossEntropyKernel(const Node &n, const KernelEnv &) : node_(&n), shape_(n) {}

  // Labels as i64, then per-row losses.
  size_t scratchBytes() const override { return shape_.rows * (sizeof(int64_t) + sizeof(double)); }

  llvm::Error run(KernelContext &ctx) override {
    int64_t rows = shape_.rows, classes = shape_.classes;
    auto *labels = static_cast<int64_t *>(ctx.scratch);
    auto *loss = reinterpret_cast<double *>(labels + rows);
    const float *x = ctx.inputs[0].as<const float>();
    if (shape_.kind != LossKind::Mse)
      if (auto e = readLabels(*node_, ctx.inputs[1], classes, labels))
        return e;
    parallelFor(rows, shape_.grain(), [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const float *row = x + b * classes;
        if (shape_.kind == LossKind::Mse) {
          const float *target = ctx.inputs[1].as<const float>() + b * classes;
          double sum = 0;
          for (int64_t c = 0; c < classes; ++c)
            sum += ((double)row[c] - target[c]) * ((double)row[c] - target[c]);
          loss[b] = sum;
        } else if (shape_.kind == LossKind::Nll) {
          loss[b] = -(double)row[labels[b]];
        } else {
          auto [top, lse] = logSumExp(row, classes);
          loss[b] = (double)top + lse - row[labels[b]];
        }
      }
    });
    double total = 0;
    for (int64_t b = 0; b < rows; ++b)
      total += loss[b];
    ctx.outputs[0].as<float>()[0] = (float)(total * shape_.scale);
    return llvm::Error::success();
  }

private:
  const Node *node_;
  LossShape shape_;
};

class SoftmaxCrossEntropyGradKernel : public Kernel {
public:
  SoftmaxCrossEntropyGradKernel(const Node &n, const KernelEnv &) : node_(&n), shape_(n) {}

  size_t scratchBytes() const override { return shape_.rows * sizeof(int64_t); }

  llvm::Error run(KernelContext &ctx) override {
    int64_t rows = shape_.rows, classes = shape_.classes;
    auto *labels = static_cast<int64_t *>(ctx.scratch);
    if (shape_.kind != LossKind::Mse)
      if (auto e = readLabels(*node_, ctx.inputs[1], classes, labels))
        return e;
    const float *x = ctx.inputs[0].as<const float>();
    float *dx = ctx.outputs[0].as<float>();
    float g = (float)(ctx.inputs[2].as<const float>()[0] * shape_.scale);
    parallelFor(rows, shape_.grain(), [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const float *row = x + b * classes;
        float *out = dx + b * classes;
        if (shape_.kind == LossKind::Mse) {
          const float *target = ctx.inputs[1].as<const float>() + b * classes;
          for (int64_t c = 0; c < classes; ++c)
            out[c] = 2 * g * (row[c] - target[c]);
          continue;
        }
        if (shape_.kind == LossKind::Nll) {
          std::fill_n(out, classes, 0.0f);
        } else {
          auto [top, lse] = logSumExp(row, classes);
          float shift = top + (float)lse;
          for (int64_t c = 0; c < classes; ++c)
            out[c] = g * std::exp(row[c] - shift);
        }
        out[labels[b]] -= g;
      }
    });
    return llvm::Error::success();
  }

  std::optional<unsigned> inPlaceOperand() const override { return 0; }

private:
  const Node *node_;
  LossShape shape_;
};

} // namespace

void registerCpuLossKernels(KernelRegistry &r) {
  r.add(Op::SoftmaxCrossEntropy, DeviceKind::CPU, DType::F32,
        makeFactory<SoftmaxCrossEntropyKernel>());
  r.add(Op::SoftmaxCrossEntropyGrad, DeviceKind::CPU, DType::F32,
        makeFactory<SoftmaxCrossEntropyGradKernel>());
}

} // namespace graphc
