//===- Reduce.cpp - ReduceSum and ReduceMean ------------------------------===//
//
// ReduceSum, ReduceMean {axes (empty: all), keepdims}: f32 in, f32 out, sums
// kept in double (vectorised conversions and adds, still memory-bound), so a
// long reduction is the exact sum rounded once, whatever the order.
//
// Axes are grouped into runs of reduced and kept axes (size-1 axes dropped,
// neighbours of one kind merged), so the work is one of two loops over
// contiguous memory:
//  - the innermost run is reduced ([N, C, H*W] -> [C]): each output sums
//    contiguous rows; several partial sums side by side keep it vectorised;
//  - the innermost run is kept ([N, C] -> [C]): each output row accumulates
//    input rows column by column.
// Outputs are split over threads (no two threads write one output); a full
// reduction to one value sums fixed-size chunks in order, so the result does
// not depend on the thread count either.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/PlainLoops.h"

namespace graphc {
namespace {

using namespace plain;

/// Sum of a contiguous row in eight interleaved double partial sums (the
/// conversions and adds vectorise; the sum is exact to double rounding).
double sumRow(const float *x, int64_t n) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      lanes[j] += x[i + j];
  double s = 0;
  for (; i < n; ++i)
    s += x[i];
  for (double l : lanes)
    s += l;
  return s;
}

/// Groups of merged axes, outermost first, with their input strides.
struct Groups {
  Dims kept, keptStrides, reduced, reducedStrides;
  bool innerReduced = false;
  int64_t inner = 1; ///< size of the innermost group
};

Groups groupAxes(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<bool> isReduced) {
  // Merge first, on (size, flag) pairs, then split by flag.
  llvm::SmallVector<std::pair<int64_t, bool>, 6> merged;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!merged.empty() && merged.back().second == isReduced[d])
      merged.back().first *= shape[d];
    else
      merged.push_back({shape[d], isReduced[d]});
  }
  Groups g;
  int64_t stride = 1;
  for (size_t i = merged.size(); i-- > 0;) {
    auto [size, red] = merged[i];
    (red ? g.reduced : g.kept).insert((red ? g.reduced : g.kept).begin(), size);
    (red ? g.reducedStrides : g.keptStrides)
        .insert((red ? g.reducedStrides : g.keptStrides).begin(), stride);
    stride *= size;
  }
  if (!merged.empty()) {
    g.innerReduced = merged.back().second;
    g.inner = merged.back().first;
  }
  return g;
}

/// Input offset of flat index i over (dims, strides).
int64_t offsetOf(int64_t i, llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<int64_t> strides) {
  int64_t off = 0;
  for (size_t d = dims.size(); d-- > 0;) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

/// Calls f(offset) for every index over (dims, strides) in row-major order.
template <typename F>
void forEachOffset(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<int64_t> strides, F &&f) {
  int64_t count = product(dims, 0, dims.size());
  llvm::SmallVector<int64_t, 8> idx(dims.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < count; ++i) {
    f(off);
    for (size_t d = dims.size(); d-- > 0;) {
      off += strides[d];
      if (++idx[d] < dims[d])
        break;
      off -= idx[d] * strides[d];
      idx[d] = 0;
    }
  }
}

/// Elements per chunk of a full reduction (fixed, for thread-count-independent sums).
constexpr int64_t kSumChunk = 1 << 16;

class ReduceKernel : public Kernel {
public:
  ReduceKernel(const Node &n, const KernelEnv &) {
    const TensorType &in = n.operand(0)->type();
    Ints axes = n.attrs().getInts("axes");
    llvm::SmallVector<bool, 6> reduced(in.rank(), axes.empty());
    for (int64_t a : axes)
      reduced[a < 0 ? a + (int64_t)in.rank() : a] = true;
    groups_ = groupAxes(in.shape, reduced);
    inputs_ = in.numElements();
    outputs_ = n.result()->type().numElements();
    int64_t count = outputs_ ? inputs_ / outputs_ : 0;
    mean_ = n.op() == Op::ReduceMean;
    scale_ = mean_ && count ? 1.0 / (double)count : 1.0;
  }

  llvm::Error run(KernelContext &ctx) override {
    float *out = ctx.outputs[0].as<float>();
    const float *in = ctx.inputs[0].as<const float>();
    if (outputs_ == 0)
      return llvm::Error::success();
    if (inputs_ == 0) {
      // Sum of nothing is 0; the mean of nothing is NaN, as in PyTorch.
      std::fill(out, out + outputs_, mean_ ? NAN : 0.0f);
      return llvm::Error::success();
    }
    if (groups_.reduced.empty()) {
      for (int64_t i = 0; i < outputs_; ++i)
        out[i] = (float)(in[i] * scale_);
      return llvm::Error::success();
    }
    if (groups_.innerReduced)
      reduceRows(out, in);
    else
      reduceColumns(out, in);
    return llvm::Error::success();
  }

private:
  /// The innermost group is reduced: out[o] = sum over outer reduced groups
  /// of contiguous rows of length `inner`.
  void reduceRows(float *out, const float *in) const {
    const Groups &g = groups_;
    llvm::ArrayRef<int64_t> outerDims = llvm::ArrayRef<int64_t>(g.reduced).drop_back();
    llvm::ArrayRef<int64_t> outerStrides = llvm::ArrayRef<int64_t>(g.reducedStrides).drop_back();
    if (outputs_ == 1 && outerDims.empty()) {
      int64_t chunks = (g.inner + kSumChunk - 1) / kSumChunk;
      std::vector<double> partial(chunks);
      parallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c)
          partial[c] = sumRow(in + c * kSumChunk, std::min(kSumChunk, g.inner - c * kSumChunk));
      });
      double s = 0;
      for (double p : partial)
        s += p;
      out[0] = (float)(s * scale_);
      return;
    }
    int64_t perOutput = inputs_ / outputs_;
    parallelFor(outputs_, std::max<int64_t>(1, kGrain / perOutput),
                [&](int64_t begin, int64_t end) {
                  for (int64_t o = begin; o < end; ++o) {
                    const float *base = in + offsetOf(o, g.kept, g.keptStrides);
                    double s = 0;
                    forEachOffset(outerDims, outerStrides,
                                  [&](int64_t off) { s += sumRow(base + off, g.inner); });
                    out[o] = (float)(s * scale_);
                  }
                });
  }

  /// The innermost group is kept: output rows of `inner` columns accumulate
  /// input rows.
  void reduceColumns(float *out, const float *in) const {
    const Groups &g = groups_;
    int64_t width = g.inner, rows = outputs_ / width;
    llvm::ArrayRef<int64_t> rowDims = llvm::ArrayRef<int64_t>(g.kept).drop_back();
    llvm::ArrayRef<int64_t> rowStrides = llvm::ArrayRef<int64_t>(g.keptStrides).drop_back();
    constexpr int64_t kCols = 256;
    int64_t colBlocks = (width + kCols - 1) / kCols;
    int64_t perOutput = inputs_ / outputs_;
    parallelFor(rows * colBlocks, std::max<int64_t>(1, kGrain / (perOutput * kCols)),
                [&](int64_t begin, int64_t end) {
                  double acc[kCols];
                  for (int64_t w = begin; w < end; ++w) {
                    int64_t r = w / colBlocks, c0 = (w % colBlocks) * kCols;
                    int64_t m = std::min(kCols, width - c0);
                    const float *base = in + offsetOf(r, rowDims, rowStrides) + c0;
                    std::fill(acc, acc + m, 0.0);
                    forEachOffset(g.reduced, g.reducedStrides, [&](int64_t off) {
                      const float *x = base + off;
                      for (int64_t c = 0; c < m; ++c)
                        acc[c] += x[c];
                    });
                    float *o = out + r * width + c0;
                    for (int64_t c = 0; c < m; ++c)
                      o[c] = (float)(acc[c] * scale_);
                  }
                });
  }

  Groups groups_;
  int64_t inputs_ = 0, outputs_ = 0;
  double scale_ = 1;
  bool mean_ = false;
};

} // namespace

void registerCpuReduceKernels(KernelRegistry &r) {
  r.add(Op::ReduceSum, DeviceKind::CPU, DType::F32, makeFactory<ReduceKernel>());
  r.add(Op::ReduceMean, DeviceKind::CPU, DType::F32, makeFactory<ReduceKernel>());
}

} // namespace graphc
