//===- Float16ViaF32.cpp - 16-bit float layers through their f32 kernels ===//
//
// See Float16ViaF32.h. The copy of the node lives in a module of its own that the
// kernel owns (kernels keep a pointer to their node).
//
//===----------------------------------------------------------------------===//

#include "kernels/Float16ViaF32.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"

#include <algorithm>

namespace graphc {
namespace {

constexpr size_t kAlign = 256; // a CUDA allocation's alignment, and a cache line's multiple

size_t aligned(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

class Float16ViaF32Kernel : public Kernel {
public:
  /// Builds the f32 copy of `n` and its kernel.
  static llvm::Expected<std::unique_ptr<Kernel>> create(const KernelRegistry &registry,
                                                        DeviceKind kind, DType narrow,
                                                        const Node &n, const KernelEnv &env,
                                                        ConvertTensor convert, Layout movable) {
    std::unique_ptr<Float16ViaF32Kernel> k(new Float16ViaF32Kernel(convert));
    auto wide = [narrow](const TensorType &t) {
      return t.dtype == narrow ? TensorType(DType::F32, t.shape) : t;
    };
    Builder b(k->shadow_.addGraph("main"));
    std::vector<Value *> operands;
    for (unsigned i = 0; i < n.numOperands(); ++i)
      operands.push_back(b.input("operand" + std::to_string(i), wide(n.operand(i)->type())));
    auto copy = b.tryCreate(n.op(), operands, n.attrs(), n.name());
    if (!copy)
      return withContext(copy.takeError(), "node '" + n.name() + "' in f32 (for its " +
                                               dtypeName(narrow).str() + " values)");
    for (unsigned i = 0; i < n.numResults(); ++i)
      if ((*copy)->result(i)->type() != wide(n.result(i)->type()))
        return nodeError(n, "its f32 copy has result " + toString((*copy)->result(i)->type()) +
                                ", not " + toString(wide(n.result(i)->type())));
    const KernelFactory *f = registry.find(n.op(), kind, DType::F32);
    if (!f)
      return nodeError(n, "has no f32 kernel to compute its " + dtypeName(narrow).str() +
                              " values with");
    auto inner = (*f)(**copy, env);
    if (!inner)
      return inner.takeError();
    k->inner_ = std::move(*inner);
    for (unsigned i = 0; i < n.numOperands(); ++i) {
      k->widened_.push_back(n.operand(i)->type().dtype == narrow);
      k->buffers_ += k->widened_[i] ? aligned(n.operand(i)->type().numElements() * 4) : 0;
    }
    for (unsigned i = 0; i < n.numResults(); ++i) {
      k->narrowed_.push_back(n.result(i)->type().dtype == narrow);
      k->buffers_ += k->narrowed_[i] ? aligned(n.result(i)->type().numElements() * 4) : 0;
    }
    k->layouts_ = float16ViaF32Layouts(n, narrow, LayoutAnswers::of(*k->inner_, **copy), movable);
    k->innerIn_.assign(n.numOperands(), Layout::Plain);
    k->innerOut_.assign(n.numResults(), Layout::Plain);
    return std::unique_ptr<Kernel>(std::move(k));
  }

  size_t scratchBytes() const override { return buffers_ + aligned(inner_->scratchBytes()); }

  bool acceptsLayout(unsigned i, Layout l) const override { return layouts_.accepts(i, l); }
  bool producesLayout(unsigned i, Layout l) const override { return layouts_.produces(i, l); }

  /// The f32 kernel takes each tensor in the layout given where it can;
  /// otherwise plain, the widening or rounding moving it.
  llvm::Error prepare(llvm::ArrayRef<Layout> operands, llvm::ArrayRef<Layout> results) override {
    auto inner = [&](bool converted, bool takes, Layout l) {
      return converted && !takes ? Layout::Plain : l;
    };
    for (unsigned i = 0; i < operands.size(); ++i)
      innerIn_[i] = inner(widened_[i], inner_->acceptsLayout(i, operands[i]), operands[i]);
    for (unsigned i = 0; i < results.size(); ++i)
      innerOut_[i] = inner(narrowed_[i], inner_->producesLayout(i, results[i]), results[i]);
    return inner_->prepare(innerIn_, innerOut_);
  }

  std::vector<PrimitiveInfo> primitivesRun() const override { return inner_->primitivesRun(); }

  ReorderCount reordersRun() const override {
    ReorderCount c = inner_->reordersRun();
    c.reorders += moved_.reorders;
    c.bytes += moved_.bytes;
    return c;
  }

  llvm::Error run(KernelContext &ctx) override {
    char *next = static_cast<char *>(ctx.scratch);
    auto take = [&](const TensorView &v, Layout inner) {
      TensorView w = v;
      w.dtype = DType::F32;
      w.layout = inner;
      w.data = next;
      next += aligned((size_t)v.numElements() * 4);
      return w;
    };
    // A conversion that also moves the layout is a reorder (at no extra pass).
    auto convert = [&](const TensorView &from, const TensorView &to) {
      if (from.layout != to.layout) {
        ++moved_.reorders;
        moved_.bytes += (int64_t)std::min(from.bytes(), to.bytes());
      }
      return convert_(from, to, ctx.stream);
    };
    std::vector<TensorView> in(ctx.inputs.begin(), ctx.inputs.end());
    std::vector<TensorView> out(ctx.outputs.begin(), ctx.outputs.end());
    for (size_t i = 0; i < in.size(); ++i)
      if (widened_[i]) {
        in[i] = take(ctx.inputs[i], innerIn_[i]);
        if (auto e = convert(ctx.inputs[i], in[i]))
          return e;
      }
    for (size_t i = 0; i < out.size(); ++i)
      if (narrowed_[i])
        out[i] = take(ctx.outputs[i], innerOut_[i]);
    KernelContext inner = ctx;
    inner.inputs = in;
    inner.outputs = out;
    inner.scratch = next;
    if (auto e = inner_->run(inner))
      return e;
    for (size_t i = 0; i < out.size(); ++i)
      if (narrowed_[i])
        if (auto e = convert(out[i], ctx.outputs[i]))
          return e;
    return llvm::Error::success();
  }

private:
  explicit Float16ViaF32Kernel(ConvertTensor convert) : convert_(convert) {}

  ConvertTensor convert_;
  Module shadow_{"float16_via_f32"};
  std::unique_ptr<Kernel> inner_;
  std::vector<bool> widened_, narrowed_;
  size_t buffers_ = 0;
  LayoutAnswers layouts_;
  /// The layouts the f32 kernel gets (prepare()).
  std::vector<Layout> innerIn_, innerOut_;
  ReorderCount moved_;
};

} // namespace

void registerFloat16ViaF32(KernelRegistry &r, DeviceKind kind, DType narrow, llvm::ArrayRef<Op> ops,
                           ConvertTensor convert, Layout movable) {
  assert((narrow == DType::F16 || narrow == DType::BF16) && "a 16-bit float type");
  for (Op op : ops)
    r.add(op, kind, narrow,
          [&r, kind, narrow, convert, movable](const Node &n, const KernelEnv &env) {
            return Float16ViaF32Kernel::create(r, kind, narrow, n, env, convert, movable);
          });
}

LayoutAnswers float16ViaF32Layouts(const Node &n, DType narrow, const LayoutAnswers &inner,
                                   Layout movable) {
  LayoutAnswers a = LayoutAnswers::plainOnly(n);
  if (movable == Layout::Plain)
    return a;
  auto convertible = [&](const TensorType &t) { return t.dtype == narrow && t.rank() == 4; };
  for (unsigned i = 0; i < n.numOperands(); ++i)
    if (convertible(n.operand(i)->type()) || inner.accepts(i, movable))
      a.allowOperand(i, movable);
  for (unsigned i = 0; i < n.numResults(); ++i)
    if (convertible(n.result(i)->type()) || inner.produces(i, movable))
      a.allowResult(i, movable);
  return a;
}

} // namespace graphc
