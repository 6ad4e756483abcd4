//===- Float16ViaF32.cpp - 16-bit float layers through their f32 kernels ===//
//
// See Float16ViaF32.h. The copy of the node lives in a module of its own that the
// kernel owns (kernels keep a pointer to their node).
//
//===----------------------------------------------------------------------===//

#include "kernels/Float16ViaF32.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"

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
                                                        ConvertTensor convert) {
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
    return std::unique_ptr<Kernel>(std::move(k));
  }

  size_t scratchBytes() const override { return buffers_ + aligned(inner_->scratchBytes()); }

  llvm::Error prepare(llvm::ArrayRef<Layout> operands, llvm::ArrayRef<Layout> results) override {
    return inner_->prepare(operands, results);
  }

  std::vector<PrimitiveInfo> primitivesRun() const override { return inner_->primitivesRun(); }

  llvm::Error run(KernelContext &ctx) override {
    char *next = static_cast<char *>(ctx.scratch);
    auto take = [&](const TensorView &v) {
      TensorView w = v;
      w.dtype = DType::F32;
      w.data = next;
      next += aligned((size_t)v.numElements() * 4);
      return w;
    };
    std::vector<TensorView> in(ctx.inputs.begin(), ctx.inputs.end());
    std::vector<TensorView> out(ctx.outputs.begin(), ctx.outputs.end());
    for (size_t i = 0; i < in.size(); ++i)
      if (widened_[i]) {
        in[i] = take(ctx.inputs[i]);
        if (auto e = convert_(ctx.inputs[i], in[i], ctx.stream))
          return e;
      }
    for (size_t i = 0; i < out.size(); ++i)
      if (narrowed_[i])
        out[i] = take(ctx.outputs[i]);
    KernelContext inner = ctx;
    inner.inputs = in;
    inner.outputs = out;
    inner.scratch = next;
    if (auto e = inner_->run(inner))
      return e;
    for (size_t i = 0; i < out.size(); ++i)
      if (narrowed_[i])
        if (auto e = convert_(out[i], ctx.outputs[i], ctx.stream))
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
};

} // namespace

void registerFloat16ViaF32(KernelRegistry &r, DeviceKind kind, DType narrow, llvm::ArrayRef<Op> ops,
                           ConvertTensor convert) {
  assert((narrow == DType::F16 || narrow == DType::BF16) && "a 16-bit float type");
  for (Op op : ops)
    r.add(op, kind, narrow, [&r, kind, narrow, convert](const Node &n, const KernelEnv &env) {
      return Float16ViaF32Kernel::create(r, kind, narrow, n, env, convert);
    });
}

} // namespace graphc
