//===- ElementwiseGrad.cpp - Rules for elementwise ops ----------------------===//
//
// Binary ops broadcast (numpy), so each operand's gradient is summed back to
// the operand's shape (reduceToShape); the sum is taken before any scalar work
// (Neg) so that work runs on the smaller tensor. Activations use their
// dedicated gradient ops where Ops.def has one (carrying the forward op's
// attributes: alpha, min/max, axis), else plain elementwise ops:
//
//   Relu        ReluGrad(y, dy)               Exp   dy * y
//   LeakyRelu   LeakyReluGrad(x, dy)          Log   dy / x
//   Sigmoid     SigmoidGrad(y, dy)            Sqrt  (dy / y) * 0.5
//   Tanh        TanhGrad(y, dy)               Neg   -dy
//   Clip        ClipGrad(x, dy)               Cast  Cast(dy) back (float to float)
//   Erf         ErfGrad(x, dy)                HardSigmoid  HardSigmoidGrad(x, dy)
//   Gelu        GeluGrad(x, dy)               HardSwish    HardSwishGrad(x, dy)
//   Softmax     SoftmaxGrad(y, dy)            Dropout (inference), Identity: dy
//   LogSoftmax  LogSoftmaxGrad(y, dy)         DropoutTrain: dy * mask
//   AddN        dy to every operand
//   Where(c, a, b)  Where(c, dy, 0) to a, Where(c, 0, dy) to b (each summed
//               back to its operand's shape); the condition and the bool
//               results of Equal, Less, Greater and Not carry no gradient
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/GradRule.h"

namespace graphc {
namespace {

Value *reduceTo(GradContext &c, Value *g, unsigned operand) {
  return reduceToShape(c.b(), g, c.x(operand)->type().shape);
}

llvm::Error addGrad(GradContext &c) {
  for (unsigned i = 0; i < 2; ++i)
    if (c.needs(i))
      c.setGrad(i, reduceTo(c, c.dy(), i));
  return llvm::Error::success();
}

llvm::Error subGrad(GradContext &c) {
  if (c.needs(0))
    c.setGrad(0, reduceTo(c, c.dy(), 0));
  if (c.needs(1))
    c.setGrad(1, c.create(Op::Neg, {reduceTo(c, c.dy(), 1)}, {}, "grad_b"));
  return llvm::Error::success();
}

llvm::Error mulGrad(GradContext &c) {
  // d(a*b) = dy*b da + dy*a db.
  for (unsigned i = 0; i < 2; ++i)
    if (c.needs(i))
      c.setGrad(
          i, reduceTo(c, c.create(Op::Mul, {c.dy(), c.x(1 - i)}, {}, i ? "grad_b" : "grad_a"), i));
  return llvm::Error::success();
}

llvm::Error divGrad(GradContext &c) {
  // y = a/b: da = dy/b, db = -dy*a/b^2 = -(dy*y)/b.
  if (c.needs(0))
    c.setGrad(0, reduceTo(c, c.create(Op::Div, {c.dy(), c.x(1)}, {}, "grad_a"), 0));
  if (c.needs(1)) {
    Value *t =
        c.create(Op::Div, {c.create(Op::Mul, {c.dy(), c.y()}, {}, "dy_y"), c.x(1)}, {}, "dy_y_b");
    c.setGrad(1, c.create(Op::Neg, {reduceTo(c, t, 1)}, {}, "grad_b"));
  }
  return llvm::Error::success();
}

/// A rule `GradOp(first, dy)` with the forward op's attributes (alpha, min,
/// max, axis), where first is the forward input or output.
GradRule activation(Op gradOp, bool useOutput) {
  return [gradOp, useOutput](GradContext &c) -> llvm::Error {
    c.setGrad(0, c.create(gradOp, {useOutput ? c.y() : c.x(0), c.dy()}, c.attrs(), "grad"));
    return llvm::Error::success();
  };
}

llvm::Error passThrough(GradContext &c) {
  c.setGrad(0, c.dy());
  return llvm::Error::success();
}

llvm::Error expGrad(GradContext &c) {
  c.setGrad(0, c.create(Op::Mul, {c.dy(), c.y()}, {}, "grad"));
  return llvm::Error::success();
}

llvm::Error logGrad(GradContext &c) {
  c.setGrad(0, c.create(Op::Div, {c.dy(), c.x(0)}, {}, "grad"));
  return llvm::Error::success();
}

llvm::Error sqrtGrad(GradContext &c) {
  Value *half = scalarConstant(c.b(), 0.5, c.y()->type().dtype, "half");
  c.setGrad(0,
            c.create(Op::Mul, {c.create(Op::Div, {c.dy(), c.y()}, {}, "dy_y"), half}, {}, "grad"));
  return llvm::Error::success();
}

llvm::Error negGrad(GradContext &c) {
  c.setGrad(0, c.create(Op::Neg, {c.dy()}, {}, "grad"));
  return llvm::Error::success();
}

llvm::Error castGrad(GradContext &c) {
  // Only float-to-float casts reach here: integer results carry no gradient.
  Attrs a;
  a.set("to", c.x(0)->type().dtype);
  c.setGrad(0, c.create(Op::Cast, {c.dy()}, std::move(a), "grad"));
  return llvm::Error::success();
}

llvm::Error dropoutTrainGrad(GradContext &c) {
  // The mask (result 1) is drawn independently of x: it passes nothing back.
  if (c.dy(0))
    c.setGrad(0, c.create(Op::Mul, {c.dy(0), c.y(1)}, {}, "grad"));
  return llvm::Error::success();
}

llvm::Error addNGrad(GradContext &c) {
  for (unsigned i = 0; i < c.node().numOperands(); ++i)
    if (c.needs(i))
      c.setGrad(i, c.dy());
  return llvm::Error::success();
}

llvm::Error whereGrad(GradContext &c) {
  Value *cond = c.x(0);
  for (unsigned i = 1; i < 3; ++i) {
    if (!c.needs(i))
      continue;
    Value *zero = scalarConstant(c.b(), 0.0, c.dy()->type().dtype, "zero");
    Value *picked = i == 1 ? c.create(Op::Where, {cond, c.dy(), zero}, {}, "grad_a")
                           : c.create(Op::Where, {cond, zero, c.dy()}, {}, "grad_b");
    c.setGrad(i, reduceTo(c, picked, i));
  }
  return llvm::Error::success();
}

} // namespace

void registerElementwiseGrads(GradRegistry &r) {
  r.add(Op::Add, addGrad);
  r.add(Op::Sub, subGrad);
  r.add(Op::Mul, mulGrad);
  r.add(Op::Div, divGrad);
  r.add(Op::Relu, activation(Op::ReluGrad, /*useOutput=*/true));
  r.add(Op::LeakyRelu, activation(Op::LeakyReluGrad, /*useOutput=*/false));
  r.add(Op::Sigmoid, activation(Op::SigmoidGrad, /*useOutput=*/true));
  r.add(Op::Tanh, activation(Op::TanhGrad, /*useOutput=*/true));
  r.add(Op::Clip, activation(Op::ClipGrad, /*useOutput=*/false));
  // These read x: their derivatives are not functions of y alone (Gelu and
  // HardSwish are not monotonic; HardSigmoid's flat ends share their y).
  r.add(Op::Erf, activation(Op::ErfGrad, /*useOutput=*/false));
  r.add(Op::Gelu, activation(Op::GeluGrad, /*useOutput=*/false));
  r.add(Op::HardSigmoid, activation(Op::HardSigmoidGrad, /*useOutput=*/false));
  r.add(Op::HardSwish, activation(Op::HardSwishGrad, /*useOutput=*/false));
  r.add(Op::Softmax, activation(Op::SoftmaxGrad, /*useOutput=*/true));
  r.add(Op::LogSoftmax, activation(Op::LogSoftmaxGrad, /*useOutput=*/true));
  r.add(Op::Exp, expGrad);
  r.add(Op::Log, logGrad);
  r.add(Op::Sqrt, sqrtGrad);
  r.add(Op::Neg, negGrad);
  r.add(Op::Cast, castGrad);
  r.add(Op::Identity, passThrough);
  r.add(Op::Dropout, passThrough);
  r.add(Op::DropoutTrain, dropoutTrainGrad);
  r.add(Op::AddN, addNGrad);
  r.add(Op::Where, whereGrad);
  for (Op op : {Op::Equal, Op::Less, Op::Greater, Op::Not})
    r.addNoGradient(op);
}

} // namespace graphc
