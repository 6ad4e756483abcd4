//===- NetBuilder.cpp - Layers the way a model's paper names them --------===//
//
// See NetBuilder.h. Each layer creates its variables first (named in the
// dotted state_dict form), then its node (named in the slashed scope form).
//
//===----------------------------------------------------------------------===//

#include "frontend/models/NetBuilder.h"

#include "ir/Diagnostics.h"

#include <cmath>

namespace graphc::models {

Initializer torchDefaultWeightInit() {
  // nn.Conv2d and nn.Linear: kaiming_uniform_(a = sqrt(5)), a bound of 1/sqrt(fan_in).
  return {"kaiming_uniform", {std::sqrt(5.0)}};
}

Initializer torchDefaultBiasInit(int64_t fanIn) {
  double bound = 1.0 / std::sqrt((double)fanIn);
  return {"uniform", {-bound, bound}};
}

NetBuilder::Scope::Scope(NetBuilder &nb, llvm::StringRef name)
    : nb_(nb), nodeScope_(nb.b_, name), previous_(nb.varScope_.size()) {
  if (!nb_.varScope_.empty())
    nb_.varScope_ += ".";
  nb_.varScope_ += name.str();
}

NetBuilder::Scope::~Scope() {
  nb_.varScope_.resize(previous_);
}

std::string NetBuilder::varName(llvm::StringRef leaf) const {
  if (varScope_.empty())
    return leaf.str();
  return varScope_ + "." + leaf.str();
}

llvm::Error NetBuilder::takeError() {
  llvm::Error e = std::move(error_);
  error_ = llvm::Error::success();
  failed_ = false;
  return e;
}

void NetBuilder::fail(llvm::Error e) {
  if (failed_) {
    llvm::consumeError(std::move(e));
    return;
  }
  llvm::consumeError(std::move(error_));
  error_ = std::move(e);
  failed_ = true;
}

Value *NetBuilder::param(llvm::StringRef leaf, llvm::ArrayRef<int64_t> shape, Initializer init,
                         VarKind kind) {
  Variable v;
  v.name = varName(leaf);
  v.type = TensorType(DType::F32, shape);
  v.kind = kind;
  v.init = std::move(init);
  return b_.newVariable(std::move(v));
}

Value *NetBuilder::create(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs,
                          llvm::StringRef leaf) {
  auto n = b_.tryCreate(op, operands, std::move(attrs), leaf);
  if (!n) {
    fail(n.takeError());
    return nullptr;
  }
  return (*n)->result();
}

Value *NetBuilder::input(llvm::StringRef name, llvm::ArrayRef<int64_t> dims, DType dtype) {
  Dims shape{kBatchDim};
  shape.append(dims.begin(), dims.end());
  return b_.input(name, TensorType(dtype, shape));
}

Value *NetBuilder::conv2d(Value *x, int64_t outChannels, Hw kernel, const ConvOptions &opts,
                          llvm::StringRef name) {
  assert(opts.groups > 0 && "conv groups come from model code");
  if (failed())
    return x;
  const TensorType &t = x->type();
  if (t.rank() != 4 || t.shape[1] % opts.groups != 0) {
    fail(makeError("layer '" + varName(name) + "': input '" + x->name() + "' " + toString(t) +
                   " is not NCHW with channels divisible by " + llvm::Twine(opts.groups)));
    return x;
  }
  int64_t inPerGroup = t.shape[1] / opts.groups;
  int64_t fanIn = inPerGroup * kernel.h * kernel.w;
  llvm::SmallVector<Value *, 3> operands{x};
  {
    Scope s(*this, name);
    operands.push_back(param("weight", {outChannels, inPerGroup, kernel.h, kernel.w},
                             opts.weightInit.value_or(torchDefaultWeightInit())));
    if (opts.bias)
      operands.push_back(
          param("bias", {outChannels}, opts.biasInit.value_or(torchDefaultBiasInit(fanIn))));
  }
  Attrs a;
  a.set("strides", Ints{opts.stride.h, opts.stride.w});
  a.set("pads", Ints{opts.pad.h, opts.pad.w, opts.pad.h, opts.pad.w});
  if (opts.dilation.h != 1 || opts.dilation.w != 1)
    a.set("dilations", Ints{opts.dilation.h, opts.dilation.w});
  if (opts.groups != 1)
    a.set("group", opts.groups);
  Value *y = create(Op::Conv, operands, std::move(a), name);
  return y ? y : x;
}

Value *NetBuilder::batchNorm(Value *x, const BatchNormOptions &opts, llvm::StringRef name) {
  if (failed())
    return x;
  if (x->type().rank() < 2) {
    fail(makeError("layer '" + varName(name) + "': input '" + x->name() + "' " +
                   toString(x->type()) + " has no channel axis"));
    return x;
  }
  int64_t c = x->type().shape[1];
  llvm::SmallVector<Value *, 5> operands{x};
  {
    Scope s(*this, name);
    operands.push_back(param("weight", {c}, {"ones", {}}));
    operands.push_back(param("bias", {c}, {"zeros", {}}));
    operands.push_back(param("running_mean", {c}, {"zeros", {}}, VarKind::State));
    operands.push_back(param("running_var", {c}, {"ones", {}}, VarKind::State));
  }
  Attrs a;
  a.set("epsilon", opts.epsilon);
  a.set("momentum", opts.momentum);
  a.set("training", int64_t(1));
  Value *y = create(Op::BatchNorm, operands, std::move(a), name);
  return y ? y : x;
}

Value *NetBuilder::linear(Value *x, int64_t outFeatures, const LinearOptions &opts,
                          llvm::StringRef name) {
  if (failed())
    return x;
  if (x->type().rank() != 2 || x->type().shape[1] == kBatchDim) {
    fail(makeError("layer '" + varName(name) + "': input '" + x->name() + "' " +
                   toString(x->type()) + " is not [N, features]"));
    return x;
  }
  int64_t in = x->type().shape[1];
  llvm::SmallVector<Value *, 3> operands{x};
  {
    Scope s(*this, name);
    operands.push_back(
        param("weight", {outFeatures, in}, opts.weightInit.value_or(torchDefaultWeightInit())));
    if (opts.bias)
      operands.push_back(
          param("bias", {outFeatures}, opts.biasInit.value_or(torchDefaultBiasInit(in))));
  }
  Attrs a;
  a.set("transB", int64_t(1));
  Value *y = create(Op::Gemm, operands, std::move(a), name);
  return y ? y : x;
}

Value *NetBuilder::basicConv(Value *x, int64_t outChannels, Hw kernel, ConvOptions opts,
                             llvm::StringRef name, double bnEpsilon) {
  Scope s(*this, name);
  opts.bias = false;
  x = conv2d(x, outChannels, kernel, opts, "conv");
  x = batchNorm(x, {.epsilon = bnEpsilon}, "bn");
  return relu(x);
}

Value *NetBuilder::relu(Value *x, llvm::StringRef name) {
  if (failed())
    return x;
  Value *y = create(Op::Relu, {x}, {}, name);
  return y ? y : x;
}

Value *NetBuilder::add(Value *a, Value *b, llvm::StringRef name) {
  if (failed())
    return a;
  Value *y = create(Op::Add, {a, b}, {}, name);
  return y ? y : a;
}

Value *NetBuilder::maxPool(Value *x, Hw kernel, Hw stride, Hw pad, llvm::StringRef name) {
  if (failed())
    return x;
  Attrs a;
  a.set("kernel_shape", Ints{kernel.h, kernel.w});
  a.set("strides", Ints{stride.h, stride.w});
  a.set("pads", Ints{pad.h, pad.w, pad.h, pad.w});
  Value *y = create(Op::MaxPool, {x}, std::move(a), name);
  return y ? y : x;
}

Value *NetBuilder::avgPool(Value *x, Hw kernel, Hw stride, Hw pad, llvm::StringRef name,
                           bool countIncludePad) {
  if (failed())
    return x;
  Attrs a;
  a.set("kernel_shape", Ints{kernel.h, kernel.w});
  a.set("strides", Ints{stride.h, stride.w});
  a.set("pads", Ints{pad.h, pad.w, pad.h, pad.w});
  a.set("count_include_pad", int64_t(countIncludePad));
  Value *y = create(Op::AveragePool, {x}, std::move(a), name);
  return y ? y : x;
}

Value *NetBuilder::globalAvgPool(Value *x, llvm::StringRef name) {
  if (failed())
    return x;
  Value *y = create(Op::GlobalAveragePool, {x}, {}, name);
  return y ? y : x;
}

Value *NetBuilder::concat(llvm::ArrayRef<Value *> xs, int64_t axis, llvm::StringRef name) {
  assert(!xs.empty() && "concatenating nothing");
  if (failed())
    return xs.front();
  Attrs a;
  a.set("axis", axis);
  Value *y = create(Op::Concat, xs, std::move(a), name);
  return y ? y : xs.front();
}

Value *NetBuilder::flatten(Value *x, llvm::StringRef name) {
  if (failed())
    return x;
  Attrs a;
  a.set("axis", int64_t(1));
  Value *y = create(Op::Flatten, {x}, std::move(a), name);
  return y ? y : x;
}

Value *NetBuilder::dropout(Value *x, double ratio, llvm::StringRef name) {
  if (failed())
    return x;
  Attrs a;
  a.set("ratio", ratio);
  Value *y = create(Op::Dropout, {x}, std::move(a), name);
  return y ? y : x;
}

void NetBuilder::output(Value *v) {
  if (!failed())
    b_.graph().addOutput(v);
}

} // namespace graphc::models
