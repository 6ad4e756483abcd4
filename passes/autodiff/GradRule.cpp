//===- GradRule.cpp - The rule registry and shared rule helpers -------------===//
//
// The registry is filled once, family by family; an op no family mentions
// stays Missing, so adding an op to Ops.def without a rule makes autodiff
// fail loudly on graphs that need it rather than drop a gradient.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/GradRule.h"

#include "ir/Diagnostics.h"

#include <cassert>

namespace graphc {

llvm::Error GradContext::fail(const llvm::Twine &msg) const {
  return nodeError(node_, "cannot differentiate: " + msg);
}

const GradRegistry &GradRegistry::global() {
  static const GradRegistry *r = [] {
    auto *reg = new GradRegistry();
    registerElementwiseGrads(*reg);
    registerNNGrads(*reg);
    registerShapeGrads(*reg);
    // Sources, variable updates and loss scaling's checks: nothing upstream
    // to send a gradient to.
    for (Op op : {Op::Input, Op::Variable, Op::Constant, Op::Assign, Op::ApplySGD,
                  Op::ApplyMomentum, Op::ApplyRMSProp, Op::ApplyAdam, Op::LossScaleStep,
                  Op::CheckFinite})
      reg->addNoGradient(op);
    return reg;
  }();
  return *r;
}

void GradRegistry::add(Op op, GradRule rule) {
  if (entries_.size() <= (size_t)op)
    entries_.resize(numOps());
  assert(entries_[(size_t)op].kind == Kind::Missing && "op registered twice");
  entries_[(size_t)op] = {Kind::Rule, std::move(rule)};
}

void GradRegistry::addNoGradient(Op op) {
  if (entries_.size() <= (size_t)op)
    entries_.resize(numOps());
  assert(entries_[(size_t)op].kind == Kind::Missing && "op registered twice");
  entries_[(size_t)op].kind = Kind::NoGradient;
}

GradRegistry::Kind GradRegistry::kind(Op op) const {
  return (size_t)op < entries_.size() ? entries_[(size_t)op].kind : Kind::Missing;
}

const GradRule &GradRegistry::rule(Op op) const {
  assert(kind(op) == Kind::Rule);
  return entries_[(size_t)op].rule;
}

bool isDifferentiable(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

Value *scalarConstant(Builder &b, double v, DType t, llvm::StringRef leaf) {
  Tensor c(TensorType(t, {}));
  c.set(0, v);
  return b.constant(std::move(c), leaf);
}

Value *reshapeTo(Builder &b, Value *v, llvm::ArrayRef<int64_t> shape) {
  if (llvm::ArrayRef<int64_t>(v->type().shape) == shape)
    return v;
  Attrs a;
  a.set("shape", Ints(shape.begin(), shape.end()));
  return b.create(Op::Reshape, {v}, std::move(a), "reshape");
}

Value *reduceToShape(Builder &b, Value *g, llvm::ArrayRef<int64_t> shape) {
  llvm::ArrayRef<int64_t> from = g->type().shape;
  if (from == shape)
    return g;
  assert(from.size() >= shape.size() && "gradient has lower rank than its operand");
  size_t lead = from.size() - shape.size();
  Ints axes;
  for (size_t i = 0; i < from.size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && from[i] != 1))
      axes.push_back(i);
  Value *sum = g;
  if (!axes.empty()) {
    Attrs a;
    a.set("axes", axes);
    a.set("keepdims", int64_t(0));
    sum = b.create(Op::ReduceSum, {g}, std::move(a), "reduce");
  }
  return reshapeTo(b, sum, shape);
}

Attrs withoutAttrs(const Attrs &a, llvm::ArrayRef<llvm::StringRef> names) {
  Attrs out = a;
  for (llvm::StringRef n : names)
    out.erase(n);
  return out;
}

} // namespace graphc
