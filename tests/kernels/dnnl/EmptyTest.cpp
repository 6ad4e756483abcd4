//===- EmptyTest.cpp - Nodes with no samples (an empty tower) --------------===//
//
// A tower that gets no samples runs its nodes on empty tensors. The oneDNN
// kernels build nothing for them (oneDNN 2.6 crashes on an empty matmul) and
// zero-fill their results: gradients summed over no samples are zero, the
// statistics of an empty batch are reported as zero, and a Gemm whose inner
// dimension is empty gives beta * C.
//
//===----------------------------------------------------------------------===//

#include "tests/kernels/dnnl/DnnlTestUtil.h"

using namespace graphc;
using namespace graphc::test;

namespace {

/// Runs the node on zero-filled inputs; every result must be all `value`
/// (results with no elements trivially are).
void expectFilled(Op op, std::vector<TensorType> inputs, Attrs attrs, double value = 0) {
  SCOPED_TRACE(opName(op).str());
  auto n = mustMakeNode(op, inputs, std::move(attrs));
  ASSERT_TRUE(n);
  std::vector<Tensor> in;
  for (const TensorType &t : inputs)
    in.emplace_back(t);
  std::vector<Tensor> out = runOnce(*n->node, in);
  ASSERT_EQ(out.size(), n->node->numResults());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].type(), n->node->result(i)->type());
    for (int64_t j = 0; j < out[i].numElements(); ++j)
      ASSERT_EQ(out[i].at(j), value) << "result " << i << " element " << j;
  }
}

TEST(DnnlEmpty, EmptyBatchGivesZeros) {
  Attrs none, pool, data, filter;
  pool.set("kernel_shape", Ints{2, 2});
  data.set("input_shape", Ints{0, 3, 5, 5});
  filter.set("filter_shape", Ints{4, 3, 3, 3});
  TensorType x = f32({0, 3, 5, 5}), c = f32({3});
  expectFilled(Op::Conv, {x, f32({4, 3, 3, 3})}, none);
  expectFilled(Op::ConvGradData, {f32({0, 4, 3, 3}), f32({4, 3, 3, 3})}, data);
  expectFilled(Op::ConvGradFilter, {x, f32({0, 4, 3, 3})}, filter);
  expectFilled(Op::MaxPool, {x}, pool);
  expectFilled(Op::MaxPoolGrad, {x, f32({0, 3, 4, 4})}, pool);
  expectFilled(Op::GlobalAveragePool, {x}, none);
  expectFilled(Op::BatchNormTrain, {x, c, c}, none);
  expectFilled(Op::BatchNormTrainGrad, {x, c, c, c, x}, none);
  expectFilled(Op::MatMul, {f32({0, 4}), f32({4, 3})}, none);
  expectFilled(Op::MatMul, {f32({2, 0}), f32({0, 3})}, none);
  // An empty batch against a broadcast one stays empty (0 against 1 is 0).
  expectFilled(Op::MatMul, {f32({0, 5, 7}), f32({7, 2})}, none);
  expectFilled(Op::MatMul, {f32({5, 7}), f32({1, 0, 7, 2})}, none);
}

TEST(DnnlEmpty, GemmWithEmptyInnerDimensionIsBetaC) {
  Attrs a;
  a.set("beta", 0.5);
  auto n = mustMakeNode(Op::Gemm, {f32({2, 0}), f32({0, 3}), f32({3})}, a);
  ASSERT_TRUE(n);
  Tensor c = Tensor::fromFloats({3}, {2, 4, 6});
  std::vector<Tensor> out = runOnce(*n->node, {Tensor(f32({2, 0})), Tensor(f32({0, 3})), c});
  ASSERT_EQ(out.size(), 1u);
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(out[0].at(i), 0.5 * c.at(i % 3));
}

} // namespace
