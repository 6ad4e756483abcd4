//===- GradCheckShapeTest.cpp - Shape and data-movement rules vs central differences

#include "GradCheck.h"

#include <gtest/gtest.h>

using namespace graphc;
using passtest::GradCheck;

namespace {

Value *unary(GradCheck &c, Op op, Tensor x, Attrs attrs) {
  return c.b().create(op, {c.param("x", std::move(x))}, std::move(attrs));
}

TEST(GradCheck, Reshape) {
  GradCheck c("reshape");
  Attrs a;
  a.set("shape", Ints{6, 4});
  c.check({unary(c, Op::Reshape, c.normal({2, 3, 4}), a)});
}

TEST(GradCheck, Flatten) {
  GradCheck c("flatten");
  Attrs a;
  a.set("axis", int64_t(2));
  c.check({unary(c, Op::Flatten, c.normal({2, 3, 2, 2}), a)});
}

TEST(GradCheck, SqueezeAndUnsqueeze) {
  GradCheck c("squeeze");
  Attrs s, u;
  s.set("axes", Ints{1});
  u.set("axes", Ints{0, 3});
  Value *y = unary(c, Op::Squeeze, c.normal({3, 1, 4}), s);
  c.check({c.b().create(Op::Unsqueeze, {y}, u)});
}

TEST(GradCheck, Transpose) {
  GradCheck c("transpose");
  Attrs a;
  a.set("perm", Ints{2, 0, 1});
  c.check({unary(c, Op::Transpose, c.normal({2, 3, 4}), a)});
}

TEST(GradCheck, TransposeDefaultPermutation) {
  GradCheck c("transpose_default");
  c.check({unary(c, Op::Transpose, c.normal({2, 3, 4}), {})});
}

TEST(GradCheck, ConcatWithAnInput) {
  GradCheck c("concat");
  Attrs a;
  a.set("axis", int64_t(-1));
  Value *x = c.param("x", c.normal({2, 2}));
  Value *fixed = c.input("fixed", c.normal({2, 1}));
  Value *z = c.param("z", c.normal({2, 3}));
  c.check({c.b().create(Op::Concat, {x, fixed, z}, a)});
}

TEST(GradCheck, SplitWithAnUnusedPart) {
  GradCheck c("split");
  Attrs a;
  a.set("axis", int64_t(1));
  a.set("split", Ints{1, 2, 3});
  Node *s = c.b().createNode(Op::Split, {c.param("x", c.normal({2, 6}))}, a);
  c.check({s->result(0), s->result(2)});
}

TEST(GradCheck, Slice) {
  GradCheck c("slice");
  Attrs a;
  a.set("starts", Ints{1, -3});
  a.set("ends", Ints{3, 100});
  a.set("axes", Ints{0, 2});
  c.check({unary(c, Op::Slice, c.normal({4, 3, 5}), a)});
}

TEST(GradCheck, PadConstant) {
  GradCheck c("pad");
  Attrs a;
  a.set("pads", Ints{0, 1, 2, 1, 0, 1});
  a.set("value", 0.5);
  c.check({unary(c, Op::Pad, c.normal({2, 3, 3}), a)});
}

TEST(GradCheck, PadNegativeCrops) {
  GradCheck c("pad_crop");
  Attrs a;
  a.set("pads", Ints{1, -1, 0, 2});
  c.check({unary(c, Op::Pad, c.normal({3, 4}), a)});
}

TEST(GradCheck, Expand) {
  GradCheck c("expand");
  Attrs a;
  a.set("shape", Ints{2, 3, 4});
  c.check({unary(c, Op::Expand, c.normal({3, 1}), a)});
}

TEST(GradCheck, GatherRepeatedIndices) {
  GradCheck c("gather");
  Value *table = c.param("table", c.normal({5, 3}));
  Value *idx = c.input("idx", Tensor::fromInts({4}, {1, 3, 1, 0}));
  c.check({c.b().create(Op::Gather, {table, idx})});
}

TEST(GradCheck, GatherInnerAxisMatrixIndices) {
  GradCheck c("gather_axis1");
  Attrs a;
  a.set("axis", int64_t(1));
  Value *table = c.param("table", c.normal({2, 4, 3}));
  Value *idx = c.input("idx", Tensor::fromInts({2, 2}, {3, 3, 0, 2}));
  c.check({c.b().create(Op::Gather, {table, idx}, a)});
}

void checkReduce(Op op, Ints axes, int64_t keepdims) {
  GradCheck c(opName(op));
  Attrs a;
  if (!axes.empty())
    a.set("axes", axes);
  a.set("keepdims", keepdims);
  c.check({unary(c, op, c.normal({2, 3, 4}), a)});
}

TEST(GradCheck, ReduceSumOneAxis) {
  checkReduce(Op::ReduceSum, {1}, 0);
}
TEST(GradCheck, ReduceSumKeepDims) {
  checkReduce(Op::ReduceSum, {0, 2}, 1);
}
TEST(GradCheck, ReduceSumAll) {
  checkReduce(Op::ReduceSum, {}, 0);
}
TEST(GradCheck, ReduceMeanLastAxis) {
  checkReduce(Op::ReduceMean, {-1}, 0);
}
TEST(GradCheck, ReduceMeanKeepDims) {
  checkReduce(Op::ReduceMean, {0, 1}, 1);
}

} // namespace
