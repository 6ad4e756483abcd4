//===- Elementwise.cpp - Elementwise and copying CUDA kernels -------------===//
//
// The CUDA twins of kernels/cpu/Elementwise.cpp, Cast.cpp, Structural.cpp and
// the copying ops: binary ops with numpy broadcasting and the activation
// gradients, unary ops, Cast, AddN, Equal, Less, Greater, Not and Where (our
// kernels, Elementwise.cu); Identity,
// Transfer (on one device), Dropout at inference and the Reshape family
// (asynchronous device copies the executor may elide: operand 0 in place);
// Constant (from pinned host memory) and Variable (from its storage).
// The same dtypes as the CPU kernels, the same in-place operands.
//
//===----------------------------------------------------------------------===//

#include "kernels/Float16ViaF32.h"
#include "kernels/LoopNest.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/ElemTypeOf.h"

#include <limits>

namespace graphc {
namespace {

using namespace cuda;

ElemParams paramsOf(const Node &n) {
  ElemParams p;
  // ONNX's defaults: LeakyRelu's alpha is 0.01, HardSigmoid's 0.2.
  bool hard = n.op() == Op::HardSigmoid || n.op() == Op::HardSigmoidGrad;
  p.alpha = (float)n.attrs().getFloat("alpha", hard ? 0.2 : 0.01);
  p.beta = (float)n.attrs().getFloat("beta", 0.5);
  p.tanh = n.attrs().getString("approximate", "none") == "tanh";
  p.lo = (float)n.attrs().getFloat("min", -std::numeric_limits<double>::infinity());
  p.hi = (float)n.attrs().getFloat("max", std::numeric_limits<double>::infinity());
  return p;
}

BinaryOp binaryOpOf(Op op) {
  switch (op) {
  case Op::Sub:
    return BinaryOp::Sub;
  case Op::Mul:
    return BinaryOp::Mul;
  case Op::Div:
    return BinaryOp::Div;
  case Op::ReluGrad:
    return BinaryOp::ReluGrad;
  case Op::LeakyReluGrad:
    return BinaryOp::LeakyReluGrad;
  case Op::SigmoidGrad:
    return BinaryOp::SigmoidGrad;
  case Op::TanhGrad:
    return BinaryOp::TanhGrad;
  case Op::ClipGrad:
    return BinaryOp::ClipGrad;
  case Op::ErfGrad:
    return BinaryOp::ErfGrad;
  case Op::GeluGrad:
    return BinaryOp::GeluGrad;
  case Op::HardSigmoidGrad:
    return BinaryOp::HardSigmoidGrad;
  case Op::HardSwishGrad:
    return BinaryOp::HardSwishGrad;
  default:
    assert(op == Op::Add && "not a binary elementwise op");
    return BinaryOp::Add;
  }
}

UnaryOp unaryOpOf(Op op) {
  switch (op) {
  case Op::LeakyRelu:
    return UnaryOp::LeakyRelu;
  case Op::Sigmoid:
    return UnaryOp::Sigmoid;
  case Op::Tanh:
    return UnaryOp::Tanh;
  case Op::Exp:
    return UnaryOp::Exp;
  case Op::Log:
    return UnaryOp::Log;
  case Op::Sqrt:
    return UnaryOp::Sqrt;
  case Op::Neg:
    return UnaryOp::Neg;
  case Op::Clip:
    return UnaryOp::Clip;
  case Op::Erf:
    return UnaryOp::Erf;
  case Op::Gelu:
    return UnaryOp::Gelu;
  case Op::HardSigmoid:
    return UnaryOp::HardSigmoid;
  case Op::HardSwish:
    return UnaryOp::HardSwish;
  default:
    assert(op == Op::Relu && "not a unary elementwise op");
    return UnaryOp::Relu;
  }
}

/// A kernel that reads two operands broadcast to its result.
class Broadcast2Kernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    auto index =
        broadcastIndex2(node(), resultType().shape, operandType(0).shape, operandType(1).shape);
    if (!index)
      return index.takeError();
    index_ = *index;
    return llvm::Error::success();
  }

protected:
  StridedIndex<2> index_;
};

class BinaryKernel : public Broadcast2Kernel {
public:
  using Broadcast2Kernel::Broadcast2Kernel;

  llvm::Error init() override {
    if (auto e = Broadcast2Kernel::init())
      return e;
    for (unsigned i = 0; i < 2; ++i)
      sameShape_[i] = operandType(i) == resultType();
    return llvm::Error::success();
  }

  std::optional<unsigned> inPlaceOperand() const override {
    unsigned first = isActivationGradient(node().op()) ? 1 : 0;
    if (sameShape_[first])
      return first;
    if (sameShape_[1 - first])
      return 1 - first;
    return std::nullopt;
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    GRAPHC_CUDA_TRY(launchBinary(binaryOpOf(node().op()), elemType(resultType().dtype),
                                 paramsOf(node()), index_, ctx.outputs[0].numElements(),
                                 ctx.outputs[0].data, ctx.inputs[0].data, ctx.inputs[1].data,
                                 streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  bool sameShape_[2] = {false, false};
};

class UnaryKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;
  std::optional<unsigned> inPlaceOperand() const override { return 0; }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    GRAPHC_CUDA_TRY(launchUnary(unaryOpOf(node().op()), elemType(resultType().dtype),
                                paramsOf(node()), ctx.outputs[0].numElements(), ctx.outputs[0].data,
                                ctx.inputs[0].data, streamOf(ctx)));
    return llvm::Error::success();
  }
};

class CompareKernel : public Broadcast2Kernel {
public:
  using Broadcast2Kernel::Broadcast2Kernel;

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    Op op = node().op();
    CompareOp cmp = op == Op::Equal  ? CompareOp::Equal
                    : op == Op::Less ? CompareOp::Less
                                     : CompareOp::Greater;
    GRAPHC_CUDA_TRY(launchCompare(cmp, elemType(operandType(0).dtype), index_,
                                  ctx.outputs[0].numElements(), ctx.outputs[0].data,
                                  ctx.inputs[0].data, ctx.inputs[1].data, streamOf(ctx)));
    return llvm::Error::success();
  }
};

class NotKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;
  std::optional<unsigned> inPlaceOperand() const override { return 0; }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    GRAPHC_CUDA_TRY(launchNot(ctx.outputs[0].numElements(), ctx.outputs[0].data, ctx.inputs[0].data,
                              streamOf(ctx)));
    return llvm::Error::success();
  }
};

class WhereKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    llvm::SmallVector<Dims, 3> shapes;
    for (unsigned i = 0; i < 3; ++i)
      shapes.push_back(Dims(operandType(i).shape));
    auto index = toStridedIndex<3>(node(), plain::broadcastNest(resultType().shape, shapes));
    if (!index)
      return index.takeError();
    index_ = *index;
    return llvm::Error::success();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    GRAPHC_CUDA_TRY(launchWhere(elemType(resultType().dtype), index_, ctx.outputs[0].numElements(),
                                ctx.outputs[0].data, ctx.inputs[0].data, ctx.inputs[1].data,
                                ctx.inputs[2].data, streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  StridedIndex<3> index_;
};

class CastKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;
  std::optional<unsigned> inPlaceOperand() const override {
    return same() ? std::optional<unsigned>(0) : std::nullopt;
  }

protected:
  /// Between float types each side may have its own layout (GpuLayoutRules.h):
  /// the conversion then transposes on the way, a reorder at no extra pass.
  llvm::Error enqueue(KernelContext &ctx) override {
    if (ctx.inputs[0].layout != ctx.outputs[0].layout)
      countReorder(ctx.outputs[0].bytes());
    return convertTensor(ctx.inputs[0], ctx.outputs[0], streamOf(ctx));
  }

private:
  bool same() const { return operandType(0).dtype == resultType().dtype; }
};

/// Float16ViaF32's widening and rounding: a Cast on the stream, transposing
/// where the f32 kernel takes a tensor in another layout.
llvm::Error convertFloats(const TensorView &from, const TensorView &to, void *stream) {
  return convertTensor(from, to, static_cast<cudaStream_t>(stream));
}

class AddNKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;
  std::optional<unsigned> inPlaceOperand() const override { return 0; }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    // Operands go in groups of kMaxAddN; after the first group the partial
    // sum in the output is the next group's first operand.
    size_t next = 0;
    while (next < ctx.inputs.size()) {
      AddNOperands ops;
      ops.count = 0;
      if (next > 0)
        ops.in[ops.count++] = ctx.outputs[0].data;
      while (ops.count < kMaxAddN && next < ctx.inputs.size())
        ops.in[ops.count++] = ctx.inputs[next++].data;
      GRAPHC_CUDA_TRY(launchAddN(elemType(resultType().dtype), ctx.outputs[0].numElements(),
                                 ctx.outputs[0].data, ops, streamOf(ctx)));
    }
    return llvm::Error::success();
  }
};

/// Identity, Transfer on one device, Dropout at inference, Reshape, Flatten,
/// Squeeze, Unsqueeze: the same bytes.
class CopyKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;
  std::optional<unsigned> inPlaceOperand() const override { return 0; }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    return copyOnDevice(ctx.outputs[0].data, ctx.inputs[0].data, ctx.outputs[0].bytes(),
                        streamOf(ctx));
  }
};

/// Constant: the value is kept in pinned host memory, so the per-run copy
/// is asynchronous. (The executor normally aliases constants instead.)
class ConstantKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;
  ~ConstantKernel() override {
    if (pinned_)
      cudaFreeHost(pinned_);
  }

  llvm::Error init() override {
    const Tensor *t = node().attrs().getTensor("value");
    if (!t)
      return makeError("needs a tensor attribute 'value'");
    bytes_ = t->bytes();
    if (!bytes_)
      return llvm::Error::success();
    GRAPHC_CUDA_TRY(cudaMallocHost(&pinned_, bytes_));
    std::memcpy(pinned_, t->raw(), bytes_);
    return llvm::Error::success();
  }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    if (!bytes_)
      return llvm::Error::success();
    GRAPHC_CUDA_TRY(cudaMemcpyAsync(ctx.outputs[0].data, pinned_, bytes_, cudaMemcpyHostToDevice,
                                    streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  void *pinned_ = nullptr;
  size_t bytes_ = 0;
};

class VariableKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    if (!ctx.variables)
      return makeError("no variable storage given");
    auto v = ctx.variables->variable(node().attrs().getString("var"));
    if (!v)
      return v.takeError();
    if (v->bytes() != ctx.outputs[0].bytes())
      return makeError("variable storage holds " + llvm::Twine(v->bytes()) + " bytes, the result " +
                       llvm::Twine(ctx.outputs[0].bytes()));
    return copyOnDevice(ctx.outputs[0].data, v->data, ctx.outputs[0].bytes(), streamOf(ctx));
  }
};

class InputKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

protected:
  llvm::Error enqueue(KernelContext &) override {
    return makeError("graph inputs are fed by the executor, not computed");
  }
};

} // namespace

void registerCudaElementwiseKernels(KernelRegistry &r) {
  const auto gpu = DeviceKind::GPU;
  auto floats = {DType::F32, DType::F16, DType::BF16};
  auto numeric = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32};
  auto all = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool};

  for (Op op : {Op::Add, Op::Sub, Op::Mul})
    r.add(op, gpu, numeric, cudaFactory<BinaryKernel>());
  for (Op op : {Op::Div, Op::ReluGrad, Op::LeakyReluGrad, Op::SigmoidGrad, Op::TanhGrad,
                Op::ClipGrad, Op::ErfGrad, Op::GeluGrad, Op::HardSigmoidGrad, Op::HardSwishGrad})
    r.add(op, gpu, floats, cudaFactory<BinaryKernel>());
  for (Op op : {Op::Relu, Op::LeakyRelu, Op::Sigmoid, Op::Tanh, Op::Exp, Op::Log, Op::Sqrt,
                Op::Clip, Op::Erf, Op::Gelu, Op::HardSigmoid, Op::HardSwish})
    r.add(op, gpu, floats, cudaFactory<UnaryKernel>());
  r.add(Op::Neg, gpu, numeric, cudaFactory<UnaryKernel>());
  r.add(Op::Cast, gpu, all, cudaFactory<CastKernel>());
  r.add(Op::AddN, gpu, numeric, cudaFactory<AddNKernel>());
  for (Op op : {Op::Equal, Op::Less, Op::Greater})
    r.add(op, gpu, numeric, cudaFactory<CompareKernel>());
  r.add(Op::Not, gpu, DType::Bool, cudaFactory<NotKernel>());
  r.add(Op::Where, gpu, DType::Bool, cudaFactory<WhereKernel>()); // keyed by the condition

  for (Op op : {Op::Identity, Op::Transfer, Op::Reshape, Op::Flatten, Op::Squeeze, Op::Unsqueeze})
    r.add(op, gpu, all, cudaFactory<CopyKernel>());
  r.add(Op::Dropout, gpu, floats, cudaFactory<CopyKernel>());
  r.add(Op::Input, gpu, all, cudaFactory<InputKernel>());
  r.add(Op::Constant, gpu, all, cudaFactory<ConstantKernel>());
  r.add(Op::Variable, gpu, all, cudaFactory<VariableKernel>());
}

void registerCudaFloat16ViaF32Kernels(KernelRegistry &r) {
  for (DType narrow : {DType::BF16, DType::F16})
    registerFloat16ViaF32(r, DeviceKind::GPU, narrow, float16ViaF32Ops(narrow), convertFloats,
                          Layout::ChannelsLast);
}

} // namespace graphc
