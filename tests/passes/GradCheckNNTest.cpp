//===- GradCheckNNTest.cpp - Layer rules vs central differences -------------===//

#include "GradCheck.h"

#include <gtest/gtest.h>

using namespace graphc;
using passtest::GradCheck;
using passtest::GradCheckOptions;

namespace {

Value *matmul(GradCheck &c, llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  return c.b().create(Op::MatMul, {c.param("a", c.normal(a)), c.param("b", c.normal(b))});
}

TEST(GradCheck, MatMulMatrices) {
  GradCheck c("matmul");
  c.check({matmul(c, {3, 4}, {4, 5})});
}

TEST(GradCheck, MatMulBatchedTimesMatrix) {
  GradCheck c("matmul_batched");
  c.check({matmul(c, {2, 3, 4}, {4, 5})});
}

TEST(GradCheck, MatMulBroadcastBatches) {
  GradCheck c("matmul_broadcast");
  c.check({matmul(c, {2, 1, 3, 4}, {3, 4, 2})});
}

TEST(GradCheck, MatMulVectorTimesMatrix) {
  GradCheck c("matmul_vector_left");
  c.check({matmul(c, {4}, {4, 5})});
}

TEST(GradCheck, MatMulBatchedTimesVector) {
  GradCheck c("matmul_vector_right");
  c.check({matmul(c, {2, 3, 4}, {4})});
}

void checkGemm(bool transA, bool transB, double alpha, double beta,
               llvm::ArrayRef<int64_t> biasShape) {
  GradCheck c("gemm");
  Attrs at;
  at.set("transA", int64_t(transA));
  at.set("transB", int64_t(transB));
  at.set("alpha", alpha);
  at.set("beta", beta);
  Value *a = c.param("a", c.normal(transA ? Dims{4, 3} : Dims{3, 4}));
  Value *b = c.param("b", c.normal(transB ? Dims{5, 4} : Dims{4, 5}));
  llvm::SmallVector<Value *, 3> ops{a, b};
  if (!biasShape.empty())
    ops.push_back(c.param("c", c.normal(biasShape)));
  c.check({c.b().create(Op::Gemm, ops, at)});
}

TEST(GradCheck, GemmPlain) {
  checkGemm(false, false, 1.0, 1.0, {3, 5});
}
TEST(GradCheck, GemmTransposedA) {
  checkGemm(true, false, 0.7, 1.3, {5});
}
TEST(GradCheck, GemmTransposedB) {
  checkGemm(false, true, 1.0, 0.5, {1, 5});
}
TEST(GradCheck, GemmTransposedBoth) {
  checkGemm(true, true, -1.5, 2.0, {3, 1});
}
TEST(GradCheck, GemmWithoutBias) {
  checkGemm(false, true, 2.0, 1.0, {});
}

TEST(GradCheck, ConvStridedPaddedGroupedWithBias) {
  GradCheck c("conv_grouped");
  Attrs a;
  a.set("strides", Ints{2, 2});
  a.set("pads", Ints{1, 1, 1, 1});
  a.set("group", int64_t(2));
  Value *x = c.param("x", c.normal({2, 4, 5, 5}));
  Value *w = c.param("w", c.normal({6, 2, 3, 3}));
  Value *bias = c.param("bias", c.normal({6}));
  c.check({c.b().create(Op::Conv, {x, w, bias}, a)});
}

TEST(GradCheck, ConvDilatedAsymmetricPads) {
  GradCheck c("conv_dilated");
  Attrs a;
  a.set("dilations", Ints{2, 1});
  a.set("pads", Ints{0, 1, 1, 0});
  Value *x = c.param("x", c.normal({1, 3, 6, 5}));
  Value *w = c.param("w", c.normal({2, 3, 3, 2}));
  c.check({c.b().create(Op::Conv, {x, w}, a)});
}

TEST(GradCheck, MaxPoolOverlappingPadded) {
  GradCheck c("max_pool");
  Attrs a;
  a.set("kernel_shape", Ints{3, 3});
  a.set("strides", Ints{2, 2});
  a.set("pads", Ints{1, 1, 1, 1});
  GradCheckOptions o;
  o.step = 1e-3; // gaps between values are 0.05: no step crosses a kink
  c.check({c.b().create(Op::MaxPool, {c.param("x", c.distinct({2, 2, 5, 5}))}, a)}, o);
}

TEST(GradCheck, MaxPoolCeilMode) {
  GradCheck c("max_pool_ceil");
  Attrs a;
  a.set("kernel_shape", Ints{2, 2});
  a.set("strides", Ints{2, 2});
  a.set("ceil_mode", int64_t(1));
  GradCheckOptions o;
  o.step = 1e-3;
  c.check({c.b().create(Op::MaxPool, {c.param("x", c.distinct({1, 2, 5, 5}))}, a)}, o);
}

void checkAveragePool(int64_t countIncludePad, int64_t ceil) {
  GradCheck c("average_pool");
  Attrs a;
  a.set("kernel_shape", Ints{3, 3});
  a.set("strides", Ints{2, 2});
  a.set("pads", Ints{1, 1, 1, 1});
  a.set("count_include_pad", countIncludePad);
  a.set("ceil_mode", ceil);
  c.check({c.b().create(Op::AveragePool, {c.param("x", c.normal({2, 2, 6, 6}))}, a)});
}

TEST(GradCheck, AveragePoolExcludingPad) {
  checkAveragePool(0, 0);
}
TEST(GradCheck, AveragePoolIncludingPad) {
  checkAveragePool(1, 0);
}
TEST(GradCheck, AveragePoolCeilMode) {
  checkAveragePool(0, 1);
}

TEST(GradCheck, GlobalAveragePool) {
  GradCheck c("global_average_pool");
  c.check({c.b().create(Op::GlobalAveragePool, {c.param("x", c.normal({2, 3, 4, 5}))})});
}

TEST(GradCheck, BatchNormTrain) {
  GradCheck c("batch_norm_train");
  Attrs a;
  a.set("epsilon", 1e-3);
  Value *x = c.param("x", c.normal({3, 2, 2, 3}));
  Value *scale = c.param("scale", c.uniform({2}, 0.5, 1.5));
  Value *bias = c.param("bias", c.normal({2}));
  Node *bn = c.b().createNode(Op::BatchNormTrain, {x, scale, bias}, a);
  c.check({bn->result(0)});
}

TEST(GradCheck, BatchNormInferenceForm) {
  GradCheck c("batch_norm_frozen");
  Attrs a;
  a.set("epsilon", 1e-3);
  Value *x = c.param("x", c.normal({2, 3, 2, 2}));
  Value *scale = c.param("scale", c.uniform({3}, 0.5, 1.5));
  Value *bias = c.param("bias", c.normal({3}));
  Value *mean = c.state("mean", c.normal({3}));
  Value *var = c.state("var", c.uniform({3}, 0.5, 2.0));
  c.check({c.b().create(Op::BatchNorm, {x, scale, bias, mean, var}, a)});
}

TEST(GradCheck, LayerNormLastAxis) {
  GradCheck c("layer_norm");
  Attrs a;
  a.set("axis", int64_t(-1));
  Value *x = c.param("x", c.normal({2, 3, 6}));
  Value *scale = c.param("scale", c.uniform({6}, 0.5, 1.5));
  Value *bias = c.param("bias", c.normal({6}));
  c.check({c.b().create(Op::LayerNorm, {x, scale, bias}, a)});
}

TEST(GradCheck, LayerNormTwoAxesWithoutBias) {
  GradCheck c("layer_norm_2d");
  Attrs a;
  a.set("axis", int64_t(1));
  a.set("epsilon", 1e-3);
  Value *x = c.param("x", c.normal({3, 2, 4}));
  Value *scale = c.param("scale", c.uniform({2, 4}, 0.5, 1.5));
  c.check({c.b().create(Op::LayerNorm, {x, scale}, a)});
}

TEST(GradCheck, LayerNormOfAnInputWithTrainableScale) {
  // x is data (no gradient asked); only scale and bias are trained.
  GradCheck c("layer_norm_input");
  Value *x = c.input("x", c.normal({4, 5}));
  Value *scale = c.param("scale", c.uniform({5}, 0.5, 1.5));
  Value *bias = c.param("bias", c.normal({5}));
  c.check({c.b().create(Op::LayerNorm, {x, scale, bias})});
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  GradCheck c("cross_entropy");
  Attrs a;
  a.set("scale", 0.25);
  Value *logits = c.param("logits", c.normal({4, 5}));
  Value *labels = c.input("labels", Tensor::fromInts({4}, {3, 0, 4, 3}));
  c.check({c.b().create(Op::SoftmaxCrossEntropy, {logits, labels}, a)});
}

} // namespace
