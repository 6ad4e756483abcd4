//===- F16ViaF32.cpp - f16 layers on CPUs: the f32 kernel, converted ------===//
//
// oneDNN 2.6 computes f16 convolutions, batch norms and pooling only on
// CPUs with AVX512-FP16, which none of ours has. An fp16 plan (GPUs with
// --precision fp16) still runs on CPU devices under --emulate: these kernels
// widen their f16 operands to f32, run the f32 kernel of a copy of the node
// whose f16 values are f32, and round its results back to f16. The values a
// step stores (and so where gradients overflow, which dynamic loss scaling
// reacts to) are those of f16 storage; the arithmetic inside a layer is f32,
// as it is in cuDNN's f16 kernels with f32 accumulation. Slow (two extra
// passes over every tensor), and plain layout only: a way to test fp16 plans
// without a GPU, not a way to train.
//
//===----------------------------------------------------------------------===//

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "kernels/cpu/PlainLoops.h"

namespace graphc {
namespace {

using namespace plain;

constexpr size_t kAlign = 64;

size_t aligned(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

TensorType wide(const TensorType &t) {
  return t.dtype == DType::F16 ? TensorType(DType::F32, t.shape) : t;
}

void widen(const uint16_t *from, float *to, int64_t n) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      to[i] = halfBitsToFloat(from[i]);
  });
}

void narrow(const float *from, uint16_t *to, int64_t n) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      to[i] = floatToHalfBits(from[i]);
  });
}

class F16ViaF32Kernel : public Kernel {
public:
  /// Builds the f32 copy of `n` and its kernel.
  static llvm::Expected<std::unique_ptr<Kernel>> create(const KernelRegistry &registry,
                                                        const Node &n, const KernelEnv &env) {
    std::unique_ptr<F16ViaF32Kernel> k(new F16ViaF32Kernel());
    Builder b(k->shadow_.addGraph("main"));
    std::vector<Value *> operands;
    for (unsigned i = 0; i < n.numOperands(); ++i)
      operands.push_back(b.input("operand" + std::to_string(i), wide(n.operand(i)->type())));
    auto copy = b.tryCreate(n.op(), operands, n.attrs(), n.name());
    if (!copy)
      return withContext(copy.takeError(), "node '" + n.name() + "' in f32 (f16 on a CPU)");
    for (unsigned i = 0; i < n.numResults(); ++i)
      if ((*copy)->result(i)->type() != wide(n.result(i)->type()))
        return nodeError(n, "its f32 copy has result " + toString((*copy)->result(i)->type()) +
                                ", not " + toString(wide(n.result(i)->type())));
    const KernelFactory *f = registry.find(n.op(), DeviceKind::CPU, DType::F32);
    if (!f)
      return nodeError(n, "has no f32 CPU kernel to compute its f16 values with");
    auto inner = (*f)(**copy, env);
    if (!inner)
      return inner.takeError();
    k->inner_ = std::move(*inner);
    for (unsigned i = 0; i < n.numOperands(); ++i)
      k->widened_.push_back(n.operand(i)->type().dtype == DType::F16);
    for (unsigned i = 0; i < n.numResults(); ++i)
      k->narrowed_.push_back(n.result(i)->type().dtype == DType::F16);
    for (unsigned i = 0; i < n.numOperands(); ++i)
      k->buffers_ += k->widened_[i] ? aligned(n.operand(i)->type().numElements() * 4) : 0;
    for (unsigned i = 0; i < n.numResults(); ++i)
      k->buffers_ += k->narrowed_[i] ? aligned(n.result(i)->type().numElements() * 4) : 0;
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
        widen(ctx.inputs[i].as<const uint16_t>(), in[i].as<float>(), in[i].numElements());
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
        narrow(out[i].as<const float>(), ctx.outputs[i].as<uint16_t>(), out[i].numElements());
    return llvm::Error::success();
  }

private:
  F16ViaF32Kernel() = default;

  Module shadow_{"f16_via_f32"};
  std::unique_ptr<Kernel> inner_;
  std::vector<bool> widened_, narrowed_;
  size_t buffers_ = 0;
};

} // namespace

void registerCpuF16ViaF32Kernels(KernelRegistry &r) {
  for (Op op : {Op::Conv, Op::ConvGradData, Op::ConvGradFilter, Op::BatchNormTrain,
                Op::BatchNormTrainGrad, Op::BatchNorm, Op::MaxPool, Op::MaxPoolGrad,
                Op::AveragePool, Op::AveragePoolGrad, Op::GlobalAveragePool, Op::ReduceSum,
                Op::ReduceMean})
    r.add(op, DeviceKind::CPU, DType::F16,
          [&r](const Node &n, const KernelEnv &env) { return F16ViaF32Kernel::create(r, n, env); });
}

} // namespace graphc
