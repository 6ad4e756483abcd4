//===- OnnxOpImportElementwise.cpp - Elementwise ONNX ops ------------------===//
//
// Add, Sub, Mul, Div (numpy broadcasting, as ours), unary activations (Erf,
// HardSigmoid with its alpha and beta, HardSwish, and opset 20's Gelu with
// `approximate` kept only when it is tanh; PyTorch's older exports of GELU,
// Div-Erf-Add-Mul-Mul or the tanh form, import op by op), Clip
// (bounds as attributes before opset 11, as constant inputs after; an absent
// bound is stored as -inf/+inf), Cast (`to` as our dtype) and CastLike (to
// its second input's), Softmax and
// LogSoftmax (opset 13 semantics; older opsets only over the last axis),
// Sum (as AddN), Reciprocal (as Div of a scalar 1: tf2onnx writes Keras'
// BatchNorm traced in training mode as ReduceMean, Sqrt and Reciprocal), Identity (of a weight: a variable of its own, see
// Importer::aliasVariable), Equal, Less, Greater, Not and Where on run-time
// data (an attention's padding mask); LessOrEqual, GreaterOrEqual, And, Or
// and Mod are folded at import (ShapeFolding.cpp) and refused on run-time
// data.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/ImportContext.h"
#include "frontend/onnx/OnnxTensor.h"

#include "ir/ShapeInference.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace graphc::onnxfe {
namespace {

/// Maps an ONNX op with data inputs only onto `op` with `attrs`.
llvm::Error direct(NodeContext &ctx, Op op, Attrs attrs = {}) {
  llvm::SmallVector<Value *, 4> operands;
  for (unsigned i = 0; i < ctx.numInputs(); ++i) {
    auto v = ctx.input(i);
    if (!v)
      return v.takeError();
    operands.push_back(*v);
  }
  auto n = ctx.emit(op, operands, std::move(attrs));
  return n ? llvm::Error::success() : n.takeError();
}

template <Op O> llvm::Error importDirect(NodeContext &ctx) {
  return direct(ctx, O);
}

llvm::Error importLeakyRelu(NodeContext &ctx) {
  Attrs a;
  a.set("alpha", ctx.getFloat("alpha", 0.01));
  return direct(ctx, Op::LeakyRelu, std::move(a));
}

llvm::Error importHardSigmoid(NodeContext &ctx) {
  Attrs a;
  a.set("alpha", ctx.getFloat("alpha", 0.2));
  a.set("beta", ctx.getFloat("beta", 0.5));
  return direct(ctx, Op::HardSigmoid, std::move(a));
}

llvm::Error importGelu(NodeContext &ctx) {
  std::string approximate = ctx.getString("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return ctx.fail("approximate '" + approximate + "' is neither 'none' nor 'tanh'");
  Attrs a;
  if (approximate == "tanh")
    a.set("approximate", approximate);
  return direct(ctx, Op::Gelu, std::move(a));
}

llvm::Error importClip(NodeContext &ctx) {
  double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
  if (ctx.opset() < 11) {
    lo = ctx.getFloat("min", lo);
    hi = ctx.getFloat("max", hi);
  } else {
    if (ctx.hasInput(1)) {
      auto v = ctx.constScalar(1, "min");
      if (!v)
        return v.takeError();
      lo = *v;
    }
    if (ctx.hasInput(2)) {
      auto v = ctx.constScalar(2, "max");
      if (!v)
        return v.takeError();
      hi = *v;
    }
  }
  auto x = ctx.input(0);
  if (!x)
    return x.takeError();
  Attrs a;
  a.set("min", lo);
  a.set("max", hi);
  auto n = ctx.emit(Op::Clip, {*x}, std::move(a));
  return n ? llvm::Error::success() : n.takeError();
}

llvm::Error importCast(NodeContext &ctx) {
  int32_t to = (int32_t)ctx.getInt("to", 0);
  auto dt = fromOnnxDType(to);
  if (!dt)
    return ctx.fail("casts to " + onnxDTypeName(to) + ", which graphc does not handle");
  Attrs a;
  a.set("to", *dt);
  return direct(ctx, Op::Cast, std::move(a));
}

/// CastLike (opset 15): a Cast to the second input's element type, which is
/// all it reads of that input.
llvm::Error importCastLike(NodeContext &ctx) {
  auto like = ctx.inputType(1);
  if (!like)
    return like.takeError();
  auto x = ctx.input(0);
  if (!x)
    return x.takeError();
  Attrs a;
  a.set("to", like->dtype);
  auto n = ctx.emit(Op::Cast, {*x}, std::move(a));
  return n ? llvm::Error::success() : n.takeError();
}

template <Op O> llvm::Error importSoftmax(NodeContext &ctx) {
  auto type = ctx.inputType(0);
  if (!type)
    return type.takeError();
  int64_t rank = type->rank();
  auto axis = normalizeAxis(ctx, ctx.getInt("axis", ctx.opset() < 13 ? 1 : -1), rank);
  if (!axis)
    return axis.takeError();
  // Before opset 13 the op flattened the dimensions from `axis` on.
  if (ctx.opset() < 13 && *axis != rank - 1)
    return ctx.fail("before opset 13 this op normalises over all dimensions from axis " +
                    llvm::Twine(*axis) + " on; graphc supports it only over the last axis");
  Attrs a;
  a.set("axis", *axis);
  return direct(ctx, O, std::move(a));
}

/// Where on run-time data. A value operand known to hold one value
/// throughout (PyTorch's masked_fill writes zeros of the mask's shape, from
/// ConstantOfShape) becomes a scalar when the other operands already give
/// the result's shape: the same result, and no constant sized by the batch,
/// which towers and another batch could not resize.
llvm::Error importWhere(NodeContext &ctx) {
  llvm::SmallVector<Value *, 3> operands(3, nullptr);
  llvm::SmallVector<Dims, 3> shapes;
  for (unsigned i = 0; i < 3; ++i) {
    auto t = ctx.inputType(i);
    if (!t)
      return t.takeError();
    shapes.push_back(t->shape);
  }
  auto resultOf = [&](std::optional<unsigned> skip) {
    std::optional<Dims> out = Dims();
    for (unsigned i = 0; i < 3 && out; ++i)
      if (i != skip)
        out = broadcastShapes(*out, shapes[i]);
    return out;
  };
  Importer &imp = ctx.importer();
  for (unsigned i = 1; i < 3; ++i) {
    const Known *k = ctx.known(i);
    if (!k || k->foreignType || k->hasBatch() || k->data.numElements() < 2 ||
        resultOf(i) != resultOf(std::nullopt))
      continue;
    size_t es = dtypeSize(k->data.dtype());
    const char *bytes = static_cast<const char *>(k->data.raw());
    bool splat = true;
    for (int64_t j = 1; j < k->data.numElements() && splat; ++j)
      splat = std::memcmp(bytes, bytes + j * es, es) == 0;
    if (!splat)
      continue;
    Tensor one(TensorType(k->data.dtype(), {}));
    std::memcpy(one.raw(), bytes, es);
    Attrs a;
    a.set("value", one);
    std::string name = imp.uniqueName(ctx.name() + "/" + (i == 1 ? "a" : "b") + "_scalar");
    auto c = createInferredNode(imp.graph(), Op::Constant, {}, {name}, std::move(a), name);
    if (!c)
      return c.takeError();
    operands[i] = (*c)->result();
  }
  for (unsigned i = 0; i < 3; ++i) {
    if (operands[i])
      continue;
    auto v = ctx.input(i);
    if (!v)
      return v.takeError();
    operands[i] = *v;
  }
  auto n = ctx.emit(Op::Where, operands);
  return n ? llvm::Error::success() : n.takeError();
}

llvm::Error importReciprocal(NodeContext &ctx) {
  auto x = ctx.input(0);
  if (!x)
    return x.takeError();
  DType dtype = (*x)->type().dtype;
  if (!isFloat(dtype))
    return ctx.fail("takes floating-point values, not " + toString((*x)->type()));
  Tensor one(TensorType(dtype, {}));
  one.set(0, 1.0);
  Attrs a;
  a.set("value", one);
  Importer &imp = ctx.importer();
  std::string name = imp.uniqueName(ctx.name() + "/one");
  auto c = createInferredNode(imp.graph(), Op::Constant, {}, {name}, std::move(a), name);
  if (!c)
    return c.takeError();
  auto n = ctx.emit(Op::Div, {(*c)->result(), *x});
  return n ? llvm::Error::success() : n.takeError();
}

/// Reached only when an input is computed at run time: folding took every
/// other case (ShapeFolding.cpp).
llvm::Error importFoldOnly(NodeContext &ctx) {
  return ctx.fail("reads a value computed at run time; graphc computes " + ctx.opType() +
                  " only at import, from constants and shapes (Equal, Less, Greater, Not and "
                  "Where also run on data)");
}

llvm::Error importIdentity(NodeContext &ctx) {
  if (!ctx.hasInput(0) || ctx.proto().output_size() < 1)
    return ctx.fail("needs one input and one output");
  Importer &imp = ctx.importer();
  const Slot *in = imp.slot(ctx.inputName(0));
  llvm::StringRef out = ctx.proto().output(0);
  bool weight = in && (!in->variable.empty() || (!in->value && in->known && !in->foldable));
  if (!weight)
    return direct(ctx, Op::Identity);
  if (!imp.isDataUse(out)) {
    // Read at import time only (a bound of Clip, say): pass the contents on.
    Slot copy = *in;
    copy.value = nullptr;
    copy.producer = ctx.name();
    *imp.slotFor(out) = std::move(copy);
    return llvm::Error::success();
  }
  auto var = imp.aliasVariable(ctx.inputName(0), out, ctx.describe());
  if (!var)
    return var.takeError();
  ctx.bindVariable(0, *var);
  return llvm::Error::success();
}

const OpRule kRules[] = {
    {"Add", importDirect<Op::Add>},
    {"Sub", importDirect<Op::Sub>},
    {"Mul", importDirect<Op::Mul>},
    {"Div", importDirect<Op::Div>},
    {"Relu", importDirect<Op::Relu>},
    {"LeakyRelu", importLeakyRelu},
    {"Sigmoid", importDirect<Op::Sigmoid>},
    {"Tanh", importDirect<Op::Tanh>},
    {"Exp", importDirect<Op::Exp>},
    {"Log", importDirect<Op::Log>},
    {"Sqrt", importDirect<Op::Sqrt>},
    {"Neg", importDirect<Op::Neg>},
    {"Reciprocal", importReciprocal},
    {"Erf", importDirect<Op::Erf>},
    {"Gelu", importGelu},
    {"HardSigmoid", importHardSigmoid},
    {"HardSwish", importDirect<Op::HardSwish>},
    {"Clip", importClip, 0b110},
    {"Cast", importCast},
    {"CastLike", importCastLike},
    {"Softmax", importSoftmax<Op::Softmax>},
    {"LogSoftmax", importSoftmax<Op::LogSoftmax>},
    {"Sum", importDirect<Op::AddN>},
    {"Equal", importDirect<Op::Equal>},
    {"Less", importDirect<Op::Less>},
    {"Greater", importDirect<Op::Greater>},
    {"Not", importDirect<Op::Not>},
    {"Where", importWhere},
    {"LessOrEqual", importFoldOnly},
    {"GreaterOrEqual", importFoldOnly},
    {"And", importFoldOnly},
    {"Or", importFoldOnly},
    {"Mod", importFoldOnly},
    {"Identity", importIdentity},
};

} // namespace

llvm::ArrayRef<OpRule> elementwiseRules() {
  return kRules;
}

const OpRule *findRule(llvm::StringRef opType) {
  for (llvm::ArrayRef<OpRule> rules :
       {elementwiseRules(), nnRules(), shapeRules(), recurrentRules()})
    for (const OpRule &r : rules)
      if (r.opType == opType)
        return &r;
  return nullptr;
}

} // namespace graphc::onnxfe
