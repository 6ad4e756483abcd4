//===- BatchNormReluGradTest.cpp - The fused ReLU mask of BatchNormTrainGrad ===//
//
// BatchNormTrainGrad(x, scale, mean, var, dy, y) {activation = relu}
// (passes/FuseBatchNormRelu.h) against ReluGrad(y, dy) followed by the
// unfused BatchNormTrainGrad, both run by their CPU kernels: the same bits,
// in every layout combination the fused kernel takes (f32), and in f16 (run
// through the f32 kernel) and, where the CPU has bf16 instructions, bf16.
//
//===----------------------------------------------------------------------===//

#include "SumBound.h"
#include "tests/kernels/dnnl/DnnlTestUtil.h"

#include "kernels/cpu/CpuBackend.h"

#include <cmath>

using namespace graphc;
using namespace graphc::test;

namespace {

/// x, scale, mean, var (positive), dy and y of a [4, 16, 5, 3] batch norm in
/// `dtype` (channel vectors f32): y has positives, negatives and exact zeros
/// of both signs, so every branch of the mask is taken.
std::vector<Tensor> operands(DType dtype, std::mt19937 &rng) {
  TensorType data(dtype, {4, 16, 5, 3}), channels(DType::F32, {16});
  std::vector<Tensor> in;
  for (const TensorType &t : {data, channels, channels, channels, data, data}) {
    Tensor f = randomTensor(TensorType(DType::F32, t.shape), rng);
    Tensor v(t);
    for (int64_t i = 0; i < v.numElements(); ++i)
      v.set(i, f.at(i));
    in.push_back(std::move(v));
  }
  for (int64_t i = 0; i < in[3].numElements(); ++i)
    in[3].set(i, std::abs(in[3].at(i)) + 0.5);
  for (int64_t i = 0; i < in[5].numElements(); i += 7)
    in[5].set(i, i % 2 ? -0.0 : 0.0);
  return in;
}

std::vector<TensorType> typesOf(llvm::ArrayRef<Tensor> in) {
  std::vector<TensorType> types;
  for (const Tensor &t : in)
    types.push_back(t.type());
  return types;
}

Attrs fusedAttrs() {
  Attrs a;
  a.set("epsilon", 1e-3);
  a.set("activation", std::string("relu"));
  return a;
}

Attrs plainAttrs() {
  Attrs a;
  a.set("epsilon", 1e-3);
  return a;
}

/// ReluGrad then the unfused gradient, with the fused run's layouts for x,
/// dy and the results (`layouts`: the fused node's).
std::vector<Tensor> apart(llvm::ArrayRef<Tensor> in, const LayoutPair *layouts) {
  auto mask = mustMakeNode(Op::ReluGrad, {in[5].type(), in[4].type()}, {});
  std::vector<Tensor> masked = runOnce(*mask->node, {in[5], in[4]});
  std::vector<TensorType> types = typesOf(in.take_front(5));
  auto grad = mustMakeNode(Op::BatchNormTrainGrad, types, plainAttrs());
  std::vector<Tensor> five(in.begin(), in.begin() + 4);
  five.push_back(masked[0]);
  if (!layouts)
    return runOnce(*grad->node, five);
  LayoutPair mine{{layouts->first.begin(), layouts->first.begin() + 5}, layouts->second};
  auto h = KernelHarness::create(*grad->node, mine);
  EXPECT_TRUE(bool(h)) << llvm::toString(h.takeError());
  auto out = (*h)->run(five);
  EXPECT_TRUE(bool(out)) << llvm::toString(out.takeError());
  return out ? *out : std::vector<Tensor>{};
}

std::string describe(const LayoutPair &layouts) {
  std::string text;
  for (Layout l : layouts.first)
    text += l == Layout::Blocked ? 'b' : 'p';
  text += " -> ";
  for (Layout l : layouts.second)
    text += l == Layout::Blocked ? 'b' : 'p';
  return text;
}

void expectSame(llvm::ArrayRef<Tensor> fused, llvm::ArrayRef<Tensor> apart) {
  ASSERT_EQ(fused.size(), 3u);
  ASSERT_EQ(apart.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(sumbound::sameBits(fused[i], apart[i])) << "result " << i;
}

TEST(BatchNormReluGrad, FusedMaskGivesTheBitsOfReluGradThenTheGradientInEveryLayout) {
  std::mt19937 rng(5);
  std::vector<Tensor> in = operands(DType::F32, rng);
  auto fused = mustMakeNode(Op::BatchNormTrainGrad, typesOf(in), fusedAttrs());
  ASSERT_TRUE(fused);
  auto probe = KernelHarness::create(*fused->node);
  ASSERT_TRUE(bool(probe)) << llvm::toString(probe.takeError());
  std::vector<LayoutPair> combos = layoutCombinations((*probe)->kernel(), *fused->node);
  if (channelBlock() > 0) {
    EXPECT_TRUE((*probe)->kernel().acceptsLayout(5, Layout::Blocked)) << "y only plain";
  }
  for (const LayoutPair &layouts : combos) {
    SCOPED_TRACE(describe(layouts));
    auto h = KernelHarness::create(*fused->node, layouts);
    ASSERT_TRUE(bool(h)) << llvm::toString(h.takeError());
    auto out = (*h)->run(in);
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    expectSame(*out, apart(in, &layouts));
  }
  // The mask matters: the unmasked gradient differs.
  auto plain = mustMakeNode(Op::BatchNormTrainGrad, typesOf(llvm::makeArrayRef(in).take_front(5)),
                            plainAttrs());
  std::vector<Tensor> unmasked = runOnce(*plain->node, llvm::makeArrayRef(in).take_front(5));
  EXPECT_FALSE(sumbound::sameBits(runOnce(*fused->node, in)[0], unmasked[0]));
}

TEST(BatchNormReluGrad, SixteenBitFusedMaskGivesTheSameBits) {
  std::vector<DType> types{DType::F16};
  if (cpuHasBf16())
    types.push_back(DType::BF16);
  for (DType t : types) {
    SCOPED_TRACE(dtypeName(t).str());
    std::mt19937 rng(9);
    std::vector<Tensor> in = operands(t, rng);
    auto fused = mustMakeNode(Op::BatchNormTrainGrad, typesOf(in), fusedAttrs());
    ASSERT_TRUE(fused);
    expectSame(runOnce(*fused->node, in), apart(in, nullptr));
  }
}

} // namespace
