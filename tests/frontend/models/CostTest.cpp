// Per-node costs (ir/Cost.h) on hand-built nodes whose counts are worked out
// by hand below.

#include "ir/Cost.h"
#include "ir/Builder.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

TensorType f32(std::initializer_list<int64_t> dims) {
  return TensorType(DType::F32, dims);
}

Value *var(Builder &b, std::string name, std::initializer_list<int64_t> dims,
           VarKind kind = VarKind::Param) {
  Variable v;
  v.name = std::move(name);
  v.type = f32(dims);
  v.kind = kind;
  return b.newVariable(std::move(v));
}

Attrs attrs(std::initializer_list<std::pair<const char *, Attribute>> kv) {
  Attrs a;
  for (const auto &[k, v] : kv)
    a.set(k, v);
  return a;
}

} // namespace

// x [N,4,8,8], w [6,2,3,3] in 2 groups, pads 1: y [N,6,8,8]; each output
// element is a dot product of 2·3·3 = 18 inputs.
TEST(Cost, ConvAndItsGradientsCostTheSameMacs) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", f32({kBatchDim, 4, 8, 8}));
  Value *w = var(b, "w", {6, 2, 3, 3});
  Value *bias = var(b, "b", {6});
  Attrs conv = attrs({{"group", int64_t(2)}, {"pads", Ints{1, 1, 1, 1}}});
  Node *y = b.createNode(Op::Conv, {x, w, bias}, conv, "conv");
  const int64_t batch = 5, outElems = 5 * 6 * 8 * 8, macs = outElems * 18;

  NodeCost c = nodeCost(*y, batch);
  EXPECT_EQ(c.macs, macs);
  EXPECT_EQ(c.flops, 2 * macs + outElems) << "a multiply and an add per MAC, plus the bias";
  EXPECT_EQ(c.bytesRead, (5 * 4 * 64 + 6 * 2 * 9 + 6) * 4);
  EXPECT_EQ(c.bytesWritten, outElems * 4);
  EXPECT_EQ(nodeCost(*y, 1).macs * 5, macs) << "the batch symbol counts as the given batch";

  Attrs gd = conv;
  gd.set("input_shape", Ints{kBatchDim, 4, 8, 8});
  Node *dx = b.createNode(Op::ConvGradData, {y->result(), w}, gd, "conv_grad_data");
  Attrs gf = conv;
  gf.set("filter_shape", Ints{6, 2, 3, 3});
  Node *dw = b.createNode(Op::ConvGradFilter, {x, y->result()}, gf, "conv_grad_filter");
  ASSERT_FALSE(bool(verify(m)));
  EXPECT_EQ(nodeCost(*dx, batch).macs, macs);
  EXPECT_EQ(nodeCost(*dx, batch).flops, 2 * macs);
  EXPECT_EQ(nodeCost(*dx, batch).bytesWritten, 5 * 4 * 64 * 4);
  EXPECT_EQ(nodeCost(*dw, batch).macs, macs);
  EXPECT_EQ(nodeCost(*dw, batch).bytesWritten, 6 * 2 * 9 * 4);
}

TEST(Cost, GemmAndMatMulCountTheirContractions) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", f32({kBatchDim, 16}));
  Node *fc = b.createNode(Op::Gemm, {x, var(b, "w", {8, 16}), var(b, "b", {8})},
                          attrs({{"transB", int64_t(1)}}), "fc");
  EXPECT_EQ(nodeCost(*fc, 3).macs, 3 * 8 * 16);
  EXPECT_EQ(nodeCost(*fc, 3).flops, 2 * 3 * 8 * 16 + 3 * 8);

  Value *a = b.input("a", f32({2, 3, 4}));
  Value *c = b.input("c", f32({4, 5}));
  Node *mm = b.createNode(Op::MatMul, {a, c}, {}, "mm");
  EXPECT_EQ(nodeCost(*mm, 7).macs, 2 * 3 * 5 * 4) << "static shapes ignore the batch";
  EXPECT_EQ(nodeCost(*mm, 7).bytesRead, (24 + 20) * 4);
}

TEST(Cost, OnlyContractionsHaveMacs) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", f32({kBatchDim, 3, 4, 4}));
  Value *r = b.create(Op::Relu, {x});
  Value *p = b.create(Op::MaxPool, {r},
                      attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}), "pool");
  Value *f = b.create(Op::Flatten, {p}, attrs({{"axis", int64_t(1)}}), "flat");
  Value *s = b.create(Op::Softmax, {f});
  for (Value *v : {r, p, f, s})
    EXPECT_EQ(nodeCost(*v->producer(), 2).macs, 0) << v->name();
  EXPECT_EQ(nodeCost(*r->producer(), 2).flops, 2 * 48);
  EXPECT_EQ(nodeCost(*p->producer(), 2).flops, 2 * 12 * 4) << "a compare per window element";
  EXPECT_EQ(nodeCost(*f->producer(), 2), NodeCost{}) << "a view moves nothing";
  EXPECT_EQ(nodeCost(*s->producer(), 2).flops, 5 * 24);
  EXPECT_EQ(nodeCost(*x->producer(), 2), NodeCost{}) << "inputs are sources";
}

// Updates read the gradient, the learning rate, the variable and its slots,
// and write the variable and its slots.
TEST(Cost, OptimizerUpdatesTouchVariablesAndSlots) {
  Module m;
  Builder b(m.main());
  var(b, "w", {10, 10});
  var(b, "w.m", {10, 10}, VarKind::Slot);
  var(b, "w.v", {10, 10}, VarKind::Slot);
  Value *g = b.input("g", f32({10, 10}));
  Value *lr = b.scalar(0.1f, "lr");
  const int64_t bytes = 400;

  Node *adam =
      b.createNode(Op::ApplyAdam, {g, lr},
                   attrs({{"var", std::string("w")}, {"slots", Strings{"w.m", "w.v"}}}), "adam");
  NodeCost c = nodeCost(*adam);
  EXPECT_EQ(c.macs, 0);
  EXPECT_EQ(c.flops, 12 * 100);
  EXPECT_EQ(c.bytesRead, bytes + 4 + 3 * bytes);
  EXPECT_EQ(c.bytesWritten, 3 * bytes);

  Node *sgd = b.createNode(Op::ApplySGD, {g, lr}, attrs({{"var", std::string("w")}}), "sgd");
  EXPECT_EQ(nodeCost(*sgd), (NodeCost{0, 200, bytes + 4 + bytes, bytes}));
  sgd->attrs().set("weight_decay", 1e-4);
  EXPECT_EQ(nodeCost(*sgd).flops, 400);

  Node *momentum = b.createNode(
      Op::ApplyMomentum, {g, lr},
      attrs({{"var", std::string("w")}, {"slots", Strings{"w.m"}}, {"nesterov", int64_t(1)}}),
      "momentum");
  EXPECT_EQ(nodeCost(*momentum), (NodeCost{0, 600, bytes + 4 + 2 * bytes, 2 * bytes}));

  Node *assign = b.createNode(Op::Assign, {g}, attrs({{"var", std::string("w")}}), "assign");
  EXPECT_EQ(nodeCost(*assign), (NodeCost{0, 0, bytes, bytes})) << "a write, no read of w";
  EXPECT_FALSE(bool(verify(m)));
}

TEST(Cost, CollectivesAndSums) {
  Module m;
  Builder b(m.main());
  Value *a = b.input("a", f32({kBatchDim, 8}));
  Value *c = b.input("c", f32({kBatchDim, 8}));
  Node *sum = b.createNode(Op::AddN, {a, c, a}, {}, "sum");
  EXPECT_EQ(nodeCost(*sum, 2).flops, 2 * 16);
  Node *ar = b.createNode(Op::AllReduce, {a, c}, attrs({{"nranks", int64_t(4)}}), "allreduce");
  EXPECT_EQ(nodeCost(*ar, 2).flops, 32 * 3 / 4) << "a ring adds (n-1)/n of each tensor per rank";
  EXPECT_EQ(nodeCost(*ar, 2).bytesRead, 64 * 2);
  EXPECT_EQ(nodeCost(*ar, 2).bytesWritten, 64 * 2);
}

// The longest sum of a training step, worked out by hand: a convolution of
// 4 input channels in 2 groups (18 taps each) into 6 channels on 8x8, batch 5;
// its filter gradient sums over 5·8·8 = 320 positions, its data gradient over
// 6/2·9 = 27, the forward over 18; then a product of 384 inputs into 10.
TEST(Cost, LongestSumOfATrainingStep) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", f32({kBatchDim, 4, 8, 8}));
  Attrs conv = attrs({{"group", int64_t(2)}, {"pads", Ints{1, 1, 1, 1}}});
  Node *y = b.createNode(Op::Conv, {x, var(b, "w", {6, 2, 3, 3})}, conv, "conv");
  EXPECT_EQ(longestSum(m.main(), 5), 5 * 8 * 8) << "the filter gradient; never the input's N·H·W";
  EXPECT_EQ(longestSum(m.main(), 1), 64);
  Value *f = b.create(Op::Flatten, {y->result()}, attrs({{"axis", int64_t(1)}}), "flat");
  b.createNode(Op::Gemm, {f, var(b, "fc", {10, 384})}, attrs({{"transB", int64_t(1)}}), "fc");
  EXPECT_EQ(longestSum(m.main(), 1), 384) << "the product's inner dimension";
  EXPECT_EQ(longestSum(m.main(), 500), 500 * 64) << "its weight gradient's rows are fewer";
}
