//===- GradCheckElementwiseTest.cpp - Elementwise rules vs central differences ===//

#include "GradCheck.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <limits>

using namespace graphc;
using passtest::GradCheck;
using passtest::GradCheckOptions;

namespace {

Value *unary(GradCheck &c, Op op, Tensor x, Attrs attrs = {}) {
  return c.b().create(op, {c.param("x", std::move(x))}, std::move(attrs));
}

Value *binary(GradCheck &c, Op op, Tensor a, Tensor b) {
  return c.b().create(op, {c.param("a", std::move(a)), c.param("b", std::move(b))});
}

TEST(GradCheck, AddBroadcasting) {
  GradCheck c("add");
  c.check({binary(c, Op::Add, c.normal({2, 3, 4}), c.normal({3, 1}))});
}

TEST(GradCheck, AddBothOperandsBroadcast) {
  GradCheck c("add_both");
  c.check({binary(c, Op::Add, c.normal({2, 1}), c.normal({1, 3}))});
}

TEST(GradCheck, SubBroadcasting) {
  GradCheck c("sub");
  c.check({binary(c, Op::Sub, c.normal({3}), c.normal({2, 3}))});
}

TEST(GradCheck, MulBroadcasting) {
  GradCheck c("mul");
  c.check({binary(c, Op::Mul, c.normal({2, 3}), c.normal({2, 1}))});
}

TEST(GradCheck, DivBroadcasting) {
  GradCheck c("div");
  c.check({binary(c, Op::Div, c.normal({2, 3}), c.uniform({3}, 0.8, 2.0))});
}

TEST(GradCheck, MulOfAValueWithItself) {
  GradCheck c("square");
  Value *x = c.param("x", c.normal({5}));
  c.check({c.b().create(Op::Mul, {x, x})});
}

TEST(GradCheck, Relu) {
  GradCheck c("relu");
  c.check({unary(c, Op::Relu, c.awayFrom({3, 4}, {0.0}, 0.1))});
}

TEST(GradCheck, LeakyRelu) {
  GradCheck c("leaky_relu");
  Attrs a;
  a.set("alpha", 0.1);
  c.check({unary(c, Op::LeakyRelu, c.awayFrom({3, 4}, {0.0}, 0.1), a)});
}

TEST(GradCheck, Sigmoid) {
  GradCheck c("sigmoid");
  c.check({unary(c, Op::Sigmoid, c.normal({3, 4}))});
}

TEST(GradCheck, Tanh) {
  GradCheck c("tanh");
  c.check({unary(c, Op::Tanh, c.normal({3, 4}))});
}

TEST(GradCheck, Exp) {
  GradCheck c("exp");
  c.check({unary(c, Op::Exp, c.normal({3, 4}))});
}

TEST(GradCheck, Log) {
  GradCheck c("log");
  c.check({unary(c, Op::Log, c.uniform({3, 4}, 0.5, 2.0))});
}

TEST(GradCheck, Sqrt) {
  GradCheck c("sqrt");
  c.check({unary(c, Op::Sqrt, c.uniform({3, 4}, 0.5, 2.0))});
}

TEST(GradCheck, Neg) {
  GradCheck c("neg");
  c.check({unary(c, Op::Neg, c.normal({3, 4}))});
}

TEST(GradCheck, Clip) {
  GradCheck c("clip");
  Attrs a;
  a.set("min", -0.5);
  a.set("max", 0.5);
  c.check({unary(c, Op::Clip, c.awayFrom({4, 5}, {-0.5, 0.5}, 0.1), a)});
}

TEST(GradCheck, Erf) {
  GradCheck c("erf");
  c.check({unary(c, Op::Erf, c.normal({3, 4}))});
}

TEST(GradCheck, Gelu) {
  GradCheck c("gelu");
  c.check({unary(c, Op::Gelu, c.uniform({3, 5}, -3, 3))});
}

TEST(GradCheck, GeluTanh) {
  GradCheck c("gelu_tanh");
  Attrs a;
  a.set("approximate", std::string("tanh"));
  c.check({unary(c, Op::Gelu, c.uniform({3, 5}, -3, 3), a)});
}

TEST(GradCheck, HardSigmoid) {
  GradCheck c("hard_sigmoid");
  Attrs a;
  a.set("alpha", 1.0 / 6);
  a.set("beta", 0.5);
  c.check({unary(c, Op::HardSigmoid, c.awayFrom({4, 5}, {-3.0, 3.0}, 0.1, 4.5), a)});
}

TEST(GradCheck, HardSwish) {
  GradCheck c("hard_swish");
  c.check({unary(c, Op::HardSwish, c.awayFrom({4, 5}, {-3.0, 3.0}, 0.1, 4.5))});
}

// The condition is data (an input compared with a constant): its operands
// carry no gradient; each value operand gets dy where it was picked, summed
// back over its broadcast axes.
TEST(GradCheck, WhereBroadcastingFromAComparison) {
  GradCheck c("where");
  Value *x = c.input("x", c.normal({2, 3, 4}));
  Value *cond = c.b().create(Op::Less, {x, c.b().constant(Tensor::scalar(0.2f))});
  Value *a = c.param("a", c.normal({3, 1})), *b = c.param("b", c.normal({2, 3, 4}));
  c.check({c.b().create(Op::Where, {cond, a, b})});
}

TEST(GradCheck, WhereOfAMaskAndAnInfiniteFill) {
  // An attention mask: Where(mask, -inf, scores) then Softmax over the keys.
  GradCheck c("where_mask");
  Tensor m(TensorType(DType::Bool, {2, 1, 4}));
  for (int64_t i = 0; i < m.numElements(); ++i)
    m.data<uint8_t>()[i] = i == 3 || i == 6;
  Value *scores = c.param("scores", c.normal({2, 3, 4}));
  Value *fill = c.b().constant(Tensor::scalar(-std::numeric_limits<float>::infinity()));
  Value *masked = c.b().create(Op::Where, {c.b().constant(m), fill, scores});
  Attrs a;
  a.set("axis", (int64_t)-1);
  c.check({c.b().create(Op::Softmax, {masked}, std::move(a))});
}

TEST(GradCheck, SoftmaxLastAxis) {
  GradCheck c("softmax");
  c.check({unary(c, Op::Softmax, c.normal({3, 5}))});
}

TEST(GradCheck, SoftmaxMiddleAxis) {
  GradCheck c("softmax_axis1");
  Attrs a;
  a.set("axis", int64_t(1));
  c.check({unary(c, Op::Softmax, c.normal({2, 4, 3}), a)});
}

TEST(GradCheck, LogSoftmax) {
  GradCheck c("log_softmax");
  c.check({unary(c, Op::LogSoftmax, c.normal({3, 5}))});
}

TEST(GradCheck, CastFloatToFloat) {
  GradCheck c("cast");
  Attrs a;
  a.set("to", DType::F32);
  c.check({unary(c, Op::Cast, c.normal({3, 2}), a)});
}

TEST(GradCheck, IdentityAndInferenceDropout) {
  GradCheck c("identity");
  Attrs a;
  a.set("ratio", 0.5);
  Value *x = c.b().create(Op::Identity, {c.param("x", c.normal({2, 3}))});
  c.check({c.b().create(Op::Dropout, {x}, a)});
}

TEST(GradCheck, DropoutTrain) {
  GradCheck c("dropout_train");
  Attrs a;
  a.set("ratio", 0.4);
  a.set("seed", int64_t(11));
  Node *d = c.b().createNode(Op::DropoutTrain, {c.param("x", c.normal({4, 8}))}, a);
  c.check({d->result(0)});
}

TEST(GradCheck, AddNWithARepeatedOperand) {
  GradCheck c("add_n");
  Value *x = c.param("x", c.normal({2, 3})), *y = c.param("y", c.normal({2, 3}));
  c.check({c.b().create(Op::AddN, {x, y, x})});
}

TEST(GradCheck, AChainSharingAVariable) {
  // tanh(x·w)·w + exp(w): three reads of w, accumulated with AddN.
  GradCheck c("chain");
  Value *w = c.param("w", c.normal({3}));
  Value *x = c.param("x", c.normal({2, 3}));
  Value *t = c.b().create(Op::Tanh, {c.b().create(Op::Mul, {x, w})});
  Value *y = c.b().create(Op::Add, {c.b().create(Op::Mul, {t, c.b().variable("w")}),
                                    c.b().create(Op::Exp, {c.b().variable("w")})});
  c.check({y});
}

void checkWithCorruptedGradient() {
  GradCheck c("corrupted");
  GradCheckOptions o;
  o.corrupt = 1.05; // 5% off: more than the 1% tolerance
  c.check({unary(c, Op::Tanh, c.normal({3, 4}))}, o);
}

TEST(GradCheck, TheCheckCanFail) {
  EXPECT_NONFATAL_FAILURE(checkWithCorruptedGradient(), "central difference");
}

} // namespace
