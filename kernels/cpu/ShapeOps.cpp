//===- ShapeOps.cpp - Data movement without arithmetic --------------------===//
//
// Reshape, Flatten, Squeeze, Unsqueeze (a copy the executor may elide by
// aliasing: they declare operand 0 in place), Transpose, Slice (negative
// steps too) and Expand (one strided copy each), Concat / ConcatBatch and
// Split / SplitBatch (row-wise memcpy, in any layout their parts fit: plain,
// blocked, channels-last), Pad (constant, reflect, edge).
//
// All of them move bytes, so they run for every dtype by element size.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/BlockedLayout.h"
#include "kernels/cpu/PlainLoops.h"

namespace graphc {
namespace {

using namespace plain;

/// Bytes below which a copy stays on the calling thread.
constexpr int64_t kCopyGrain = 1 << 18;

/// Reshape, Flatten, Squeeze, Unsqueeze: the same bytes under another shape.
class ReshapeKernel : public Kernel {
public:
  ReshapeKernel(const Node &, const KernelEnv &) {}
  llvm::Error run(KernelContext &ctx) override {
    const TensorView &out = ctx.outputs[0];
    if (out.data != ctx.inputs[0].data && out.bytes())
      std::memcpy(out.data, ctx.inputs[0].data, out.bytes());
    return llvm::Error::success();
  }
  std::optional<unsigned> inPlaceOperand() const override { return 0; }
};

/// Transpose, Slice, Expand: out[i] = in[nest offset at i].
class StridedCopyKernel : public Kernel {
public:
  StridedCopyKernel(const Node &n, const KernelEnv &)
      : elemSize_(dtypeSize(n.result()->type().dtype)), nest_(stridedCopyNest(n)) {}

  llvm::Error run(KernelContext &ctx) override {
    stridedCopy(ctx.outputs[0].data, ctx.inputs[0].data, nest_, elemSize_);
    return llvm::Error::success();
  }

private:
  size_t elemSize_;
  LoopNest nest_;
};

/// Concat and Split along `axis`: each operand (result) is `outer` rows of
/// its own width in bytes, interleaved in the joined tensor.
struct Pieces {
  int64_t outer = 1, joinedRow = 0;
  llvm::SmallVector<int64_t, 8> rowBytes, offset;

  /// `parts` joined along `axis`, as stored in NCHW order (plain, and
  /// blocked where joinsWholeBlocks) or, with `channelsLast`, in NHWC.
  Pieces(llvm::ArrayRef<const TensorType *> parts, int64_t axis, bool channelsLast = false) {
    size_t es = dtypeSize(parts[0]->dtype);
    auto stored = [&](const TensorType *t) {
      return channelsLast ? channelsLastDims(t->shape) : Dims(t->shape);
    };
    if (channelsLast)
      axis = channelsLastAxis(axis);
    outer = product(stored(parts[0]), 0, axis);
    for (const TensorType *t : parts) {
      Dims d = stored(t);
      offset.push_back(joinedRow);
      rowBytes.push_back(product(d, axis, (int64_t)d.size()) * (int64_t)es);
      joinedRow += rowBytes.back();
    }
  }

  /// Calls f(part, row) for every (row, part) pair, in parallel when big.
  template <typename F> void forEach(F &&f) const {
    int64_t parts = rowBytes.size(), total = outer * joinedRow;
    int64_t items = outer * parts;
    int64_t grain = total ? std::max<int64_t>(1, kCopyGrain * items / total) : items;
    parallelFor(items, grain, [&](int64_t begin, int64_t end) {
      for (int64_t w = begin; w < end; ++w)
        f(w % parts, w / parts);
    });
  }
};

int64_t joinAxis(const Node &n, size_t rank) {
  if (n.op() == Op::ConcatBatch || n.op() == Op::SplitBatch)
    return 0;
  int64_t a = n.attrs().getInt("axis");
  return a < 0 ? a + (int64_t)rank : a;
}

/// Joining 4-d f32 tensors along the batch or channel axis moves the same
/// bytes in nChw<B>c as in NCHW when every part has whole channel blocks: per
/// image, a part is one contiguous run in both layouts.
bool joinsWholeBlocks(llvm::ArrayRef<const TensorType *> parts, int64_t axis) {
  if (axis > 1)
    return false;
  for (const TensorType *t : parts)
    if (!blockable(*t))
      return false;
  return true;
}

/// What Concat and Split share: the parts (operands or results) and the
/// pieces they are copied in, per layout: plain and blocked alike (where
/// joinsWholeBlocks), channels-last along the axis the joined one becomes.
class JoinKernel : public Kernel {
public:
  JoinKernel(llvm::SmallVector<const TensorType *, 8> parts, int64_t axis)
      : blocked_(joinsWholeBlocks(parts, axis)), pieces_(parts, axis) {
    if (llvm::all_of(parts,
                     [](const TensorType *t) { return cpuLayoutFits(*t, Layout::ChannelsLast); }))
      last_.emplace(parts, axis, true);
  }

  bool acceptsLayout(unsigned, Layout l) const override { return fits(l); }
  bool producesLayout(unsigned, Layout l) const override { return fits(l); }
  bool layoutFollowsOperands() const override { return true; }

protected:
  const Pieces &pieces(Layout l) const { return l == Layout::ChannelsLast ? *last_ : pieces_; }

private:
  bool fits(Layout l) const {
    return l == Layout::Plain || (l == Layout::Blocked && blocked_) ||
           (l == Layout::ChannelsLast && last_);
  }

  bool blocked_;
  Pieces pieces_;
  std::optional<Pieces> last_;
};

class ConcatKernel : public JoinKernel {
public:
  ConcatKernel(const Node &n, const KernelEnv &)
      : JoinKernel(types(n), joinAxis(n, n.result()->type().rank())) {}

  llvm::Error run(KernelContext &ctx) override {
    auto *out = static_cast<char *>(ctx.outputs[0].data);
    const Pieces &p = pieces(ctx.outputs[0].layout);
    p.forEach([&](int64_t part, int64_t row) {
      int64_t bytes = p.rowBytes[part];
      if (bytes)
        std::memcpy(out + row * p.joinedRow + p.offset[part],
                    static_cast<const char *>(ctx.inputs[part].data) + row * bytes, bytes);
    });
    return llvm::Error::success();
  }

private:
  static llvm::SmallVector<const TensorType *, 8> types(const Node &n) {
    llvm::SmallVector<const TensorType *, 8> t;
    for (const Value *v : n.operands())
      t.push_back(&v->type());
    return t;
  }
};

class SplitKernel : public JoinKernel {
public:
  SplitKernel(const Node &n, const KernelEnv &)
      : JoinKernel(types(n), joinAxis(n, n.operand(0)->type().rank())) {}

  llvm::Error run(KernelContext &ctx) override {
    auto *in = static_cast<const char *>(ctx.inputs[0].data);
    const Pieces &p = pieces(ctx.inputs[0].layout);
    p.forEach([&](int64_t part, int64_t row) {
      int64_t bytes = p.rowBytes[part];
      if (bytes)
        std::memcpy(static_cast<char *>(ctx.outputs[part].data) + row * bytes,
                    in + row * p.joinedRow + p.offset[part], bytes);
    });
    return llvm::Error::success();
  }

private:
  static llvm::SmallVector<const TensorType *, 8> types(const Node &n) {
    llvm::SmallVector<const TensorType *, 8> t;
    for (const auto &r : n.results())
      t.push_back(&r->type());
    return t;
  }
};

//===-- Pad ----------------------------------------------------------------===//

/// Where output index o along an axis of size n reads (-1: the fill value).
int64_t padSource(int64_t o, int64_t before, int64_t n, llvm::StringRef mode) {
  int64_t i = o - before;
  if (n == 0 || mode == "constant")
    return i >= 0 && i < n ? i : -1;
  if (mode == "edge")
    return std::clamp<int64_t>(i, 0, n - 1);
  if (n == 1)
    return 0;
  int64_t period = 2 * (n - 1);
  i = ((i % period) + period) % period;
  return i < n ? i : period - i;
}

class PadKernel : public Kernel {
public:
  PadKernel(const Node &n, const KernelEnv &) {
    const TensorType &in = n.operand(0)->type(), &out = n.result()->type();
    Ints pads = n.attrs().getInts("pads");
    std::string mode = n.attrs().getString("mode", "constant");
    size_t rank = in.rank();
    elemSize_ = dtypeSize(in.dtype);
    outDims_ = out.shape;
    inStrides_ = contiguousStrides(in.shape);
    for (size_t d = 0; d < rank; ++d) {
      sources_.emplace_back();
      for (int64_t o = 0; o < out.shape[d]; ++o)
        sources_.back().push_back(padSource(o, pads[d], in.shape[d], mode));
    }
    // The stretch of the last axis that copies the input row as it is.
    if (rank) {
      const std::vector<int64_t> &last = sources_.back();
      int64_t before = pads[rank - 1];
      copyBegin_ = std::clamp<int64_t>(before, 0, (int64_t)last.size());
      copyEnd_ = copyBegin_;
      while (copyEnd_ < (int64_t)last.size() && last[copyEnd_] == copyEnd_ - before)
        ++copyEnd_;
    }
    Tensor fill(TensorType(in.dtype, {}));
    fill.set(0, n.attrs().getFloat("value", 0));
    std::memcpy(&fill_, fill.raw(), elemSize_);
  }

  llvm::Error run(KernelContext &ctx) override {
    switch (elemSize_) {
    case 1:
      return pad<uint8_t>(ctx);
    case 2:
      return pad<uint16_t>(ctx);
    case 4:
      return pad<uint32_t>(ctx);
    default:
      return pad<uint64_t>(ctx);
    }
  }

private:
  template <typename T> llvm::Error pad(KernelContext &ctx) {
    T *out = ctx.outputs[0].as<T>();
    const T *in = ctx.inputs[0].as<const T>();
    T fill;
    std::memcpy(&fill, &fill_, sizeof(T));
    size_t rank = outDims_.size();
    if (rank == 0) {
      *out = *in;
      return llvm::Error::success();
    }
    int64_t width = outDims_[rank - 1];
    int64_t rows = product(outDims_, 0, rank - 1);
    if (rows * width == 0)
      return llvm::Error::success();
    const std::vector<int64_t> &last = sources_[rank - 1];
    parallelFor(rows, std::max<int64_t>(1, kGrain / width), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        // The input row this output row reads, or none (all fill).
        int64_t base = 0, rest = r;
        bool inside = true;
        for (size_t d = rank - 1; d-- > 0;) {
          int64_t s = sources_[d][rest % outDims_[d]];
          rest /= outDims_[d];
          inside = inside && s >= 0;
          base += s * inStrides_[d];
        }
        T *o = out + r * width;
        if (!inside) {
          std::fill(o, o + width, fill);
          continue;
        }
        for (int64_t j = 0; j < copyBegin_; ++j)
          o[j] = last[j] < 0 ? fill : in[base + last[j]];
        if (copyEnd_ > copyBegin_)
          std::memcpy(o + copyBegin_, in + base + last[copyBegin_],
                      (copyEnd_ - copyBegin_) * sizeof(T));
        for (int64_t j = copyEnd_; j < width; ++j)
          o[j] = last[j] < 0 ? fill : in[base + last[j]];
      }
    });
    return llvm::Error::success();
  }

  size_t elemSize_ = 4;
  Dims outDims_, inStrides_;
  std::vector<std::vector<int64_t>> sources_;
  uint64_t fill_ = 0;
  int64_t copyBegin_ = 0, copyEnd_ = 0;
};

} // namespace

void registerCpuShapeKernels(KernelRegistry &r) {
  const auto cpu = DeviceKind::CPU;
  auto all = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool};
  for (Op op : {Op::Reshape, Op::Flatten, Op::Squeeze, Op::Unsqueeze})
    r.add(op, cpu, all, makeFactory<ReshapeKernel>());
  for (Op op : {Op::Transpose, Op::Slice, Op::Expand})
    r.add(op, cpu, all, makeFactory<StridedCopyKernel>());
  for (Op op : {Op::Concat, Op::ConcatBatch})
    r.add(op, cpu, all, makeFactory<ConcatKernel>());
  for (Op op : {Op::Split, Op::SplitBatch})
    r.add(op, cpu, all, makeFactory<SplitKernel>());
  r.add(Op::Pad, cpu, all, makeFactory<PadKernel>());
}

} // namespace graphc
