//===- ConvAlgorithmTest.cpp - Where --conv-algorithm takes Winograd --------===//
//
// Which implementation each convolution direction runs under auto, direct
// and winograd (kernels/cpu/Conv.cpp's convAlgorithms()), read from the
// kernel's primitivesRun(); and Winograd's results against the direct ones on
// an inception_v3-sized case. Its accuracy against PyTorch is
// DnnlReference.ConvWinograd's. On a CPU without oneDNN's Winograd (AVX2)
// our own Winograd (kernels/cpu/Winograd1d.h) takes the 3x3s instead, which
// the first test checks there; it takes the 1xK, Kx1 and 5x5 windows on AVX2
// and AVX-512 alike.
//
//===----------------------------------------------------------------------===//

#include "SumBound.h"
#include "tests/kernels/dnnl/DnnlTestUtil.h"

#include "ir/Builder.h"

#include "kernels/cpu/BlockedLayout.h"
#include "kernels/cpu/ConvWinograd1d.h"
#include "kernels/cpu/CpuBackend.h"
#include "kernels/cpu/Winograd1d.h"

#include "llvm/ADT/StringRef.h"

#include <cstring>

using namespace graphc;
using namespace graphc::test;

namespace {

/// A convolution's three nodes (Conv, ConvGradData, ConvGradFilter) and
/// random operands for each.
struct ConvNodes {
  std::unique_ptr<OneNode> nodes[3];
  std::vector<Tensor> inputs[3];
};

ConvNodes convNodes(const TensorType &x, const TensorType &w, Ints pads, Ints strides = {1, 1}) {
  std::mt19937 rng(7);
  ConvNodes c;
  Attrs a = convAttrs(strides, pads, {1, 1}, 1);
  c.nodes[0] = mustMakeNode(Op::Conv, {x, w}, a);
  TensorType y = c.nodes[0]->node->result()->type();
  Attrs data = a, filter = a;
  data.set("input_shape", Ints(x.shape.begin(), x.shape.end()));
  filter.set("filter_shape", Ints(w.shape.begin(), w.shape.end()));
  c.nodes[1] = mustMakeNode(Op::ConvGradData, {y, w}, data);
  c.nodes[2] = mustMakeNode(Op::ConvGradFilter, {x, y}, filter);
  Tensor tx = randomTensor(x, rng), tw = randomTensor(w, rng), ty = randomTensor(y, rng);
  c.inputs[0] = {tx, tw};
  c.inputs[1] = {ty, tw};
  c.inputs[2] = {tx, ty};
  return c;
}

/// "wd-" for each direction (forward, data, filter): Winograd or direct.
std::string algorithmsRun(ConvNodes &c, ConvAlgorithm algorithm) {
  std::string s;
  for (int d = 0; d < 3; ++d) {
    std::vector<PrimitiveInfo> ran;
    runOnce(*c.nodes[d]->node, c.inputs[d], algorithm, ran);
    bool wino = llvm::any_of(ran, [](const PrimitiveInfo &p) {
      return llvm::StringRef(p.implementation).contains("wino");
    });
    s += wino ? 'w' : 'd';
  }
  return s;
}

TEST(ConvAlgorithm, AutoTakesWinogradWhereItPays) {
  auto resnetBlock = convNodes(f32({16, 64, 28, 28}), f32({64, 64, 3, 3}), {1, 1, 1, 1});
  auto small7x7 = convNodes(f32({16, 512, 7, 7}), f32({512, 512, 3, 3}), {1, 1, 1, 1});
  auto fewImages7x7 = convNodes(f32({4, 512, 7, 7}), f32({512, 512, 3, 3}), {1, 1, 1, 1});
  auto tiny = convNodes(f32({4, 32, 14, 14}), f32({64, 32, 3, 3}), {1, 1, 1, 1});
  auto oneChannel = convNodes(f32({8, 1, 60, 60}), f32({32, 1, 3, 3}), {1, 1, 1, 1});
  auto strided = convNodes(f32({8, 64, 30, 30}), f32({64, 64, 3, 3}), {1, 1, 1, 1}, {2, 2});
  auto window1x7 = convNodes(f32({8, 64, 30, 30}), f32({64, 64, 1, 7}), {0, 3, 0, 3});
  auto window3x1 = convNodes(f32({8, 64, 8, 8}), f32({64, 64, 3, 1}), {1, 0, 1, 0});
  auto window1x5 = convNodes(f32({8, 64, 9, 9}), f32({64, 64, 1, 5}), {0, 2, 0, 2});
  auto valid1x7 = convNodes(f32({8, 64, 30, 30}), f32({64, 64, 1, 7}), {0, 0, 0, 0});
  auto window5x5 = convNodes(f32({8, 48, 35, 35}), f32({64, 48, 5, 5}), {2, 2, 2, 2});
  for (ConvNodes *c : {&resnetBlock, &small7x7, &fewImages7x7, &tiny, &oneChannel, &strided,
                       &window1x7, &window3x1, &window1x5, &valid1x7, &window5x5})
    EXPECT_EQ(algorithmsRun(*c, ConvAlgorithm::Direct), "ddd");
  // Neither Winograd takes a strided or a one-channel convolution.
  for (ConvNodes *c : {&oneChannel, &strided}) {
    EXPECT_EQ(algorithmsRun(*c, ConvAlgorithm::Auto), "ddd");
    EXPECT_EQ(algorithmsRun(*c, ConvAlgorithm::Winograd), "ddd");
  }
  // Our own F(4, K) (kernels/cpu/Winograd1d.h), on AVX2 and AVX-512 alike:
  // the 1xK and Kx1 windows; the 5-tap ones (unmeasured) only when asked; the
  // 5x5 windows (oneDNN has no Winograd for them) where they are large enough.
  const bool ours = wino1d::kernelsFor(channelBlock()) != nullptr;
  if (ours) {
    for (ConvNodes *c : {&window1x7, &window3x1, &window5x5}) {
      EXPECT_EQ(algorithmsRun(*c, ConvAlgorithm::Auto), "www");
      EXPECT_EQ(algorithmsRun(*c, ConvAlgorithm::Winograd), "www");
    }
    EXPECT_EQ(algorithmsRun(window1x5, ConvAlgorithm::Auto), "ddd");
    EXPECT_EQ(algorithmsRun(window1x5, ConvAlgorithm::Winograd), "www");
    EXPECT_EQ(algorithmsRun(valid1x7, ConvAlgorithm::Winograd), "www");
  }
  if (!cpuHasWinograd()) {
    if (!ours)
      GTEST_SKIP() << "no Winograd convolution on this CPU: every 3x3 is direct";
    // Our own takes the 3x3s: under auto those with 10^8 multiply-adds or more
    // and 64 or more per byte of transformed weights (512 channels on 7x7: at
    // batch 16, not at 4).
    EXPECT_EQ(algorithmsRun(resnetBlock, ConvAlgorithm::Auto), "www");
    EXPECT_EQ(algorithmsRun(small7x7, ConvAlgorithm::Auto), "www");
    EXPECT_EQ(algorithmsRun(fewImages7x7, ConvAlgorithm::Auto), "ddd");
    EXPECT_EQ(algorithmsRun(tiny, ConvAlgorithm::Auto), "ddd");
    for (ConvNodes *c : {&resnetBlock, &small7x7, &fewImages7x7, &tiny})
      EXPECT_EQ(algorithmsRun(*c, ConvAlgorithm::Winograd), "www");
    return;
  }
  // oneDNN's F(4x4, 3x3) takes the 3x3s where it has them.
  EXPECT_EQ(algorithmsRun(resnetBlock, ConvAlgorithm::Auto), "www");
  // Not the filter gradient of a 7x7 output: ours takes that one under auto
  // where it can (at batch 16), direct otherwise.
  EXPECT_EQ(algorithmsRun(small7x7, ConvAlgorithm::Auto), ours ? "www" : "wwd");
  EXPECT_EQ(algorithmsRun(fewImages7x7, ConvAlgorithm::Auto), "wwd");
  EXPECT_EQ(algorithmsRun(small7x7, ConvAlgorithm::Winograd), "www");
  // Under 10^8 multiply-adds: direct unless asked.
  EXPECT_EQ(algorithmsRun(tiny, ConvAlgorithm::Auto), "ddd");
  EXPECT_EQ(algorithmsRun(tiny, ConvAlgorithm::Winograd), "www");
}

// Weights that never change while the module runs (inference: a constant,
// or a variable nothing writes) keep their transform, so auto takes our
// Winograd at 16 multiply-adds per byte of transformed weights instead of 64:
// resnet18's 512-channel 3x3 on 7x7 at batch 4 (24 per byte), not at batch 1
// (6), and not while an update writes the weights.
TEST(ConvAlgorithm, AutoTakesOursSoonerWhereWeightsAreKept) {
  if (!wino1d::kernelsFor(channelBlock()))
    GTEST_SKIP() << "no vector code for our Winograd on this CPU";
  auto decides = [](int64_t batch, const char *weights) {
    Module m;
    Builder b(m.main());
    Value *x = b.input("x", f32({batch, 512, 7, 7}));
    Value *w;
    if (!std::strcmp(weights, "constant")) {
      w = b.constant(Tensor(f32({512, 512, 3, 3})));
    } else {
      Variable v;
      v.name = "w";
      v.type = f32({512, 512, 3, 3});
      w = b.newVariable(std::move(v));
      if (!std::strcmp(weights, "updated")) {
        Attrs a;
        a.set("var", std::string("w"));
        b.createNode(Op::Assign, {w}, a, "update");
      }
    }
    Node *conv = b.createNode(Op::Conv, {x, w}, convAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1));
    return winograd1dTakes(*conv, ConvAlgorithm::Auto, false);
  };
  EXPECT_TRUE(decides(4, "constant"));
  EXPECT_TRUE(decides(4, "variable"));
  EXPECT_FALSE(decides(4, "updated")) << "training: the transform is paid per call";
  EXPECT_FALSE(decides(1, "constant"));
  EXPECT_TRUE(decides(16, "updated"));
}

// Inference convolutions carry their ReLU and residual add (the sum
// attribute: the last operand added before the ReLU) fused in
// (passes/InferenceFusion.h): ours applies them in its output transform,
// against oneDNN's post-ops in the direct convolution.
TEST(ConvAlgorithm, OursTakesFusedReluAndResidualAdd) {
  if (!wino1d::kernelsFor(channelBlock()))
    GTEST_SKIP() << "no vector code for our Winograd on this CPU";
  std::mt19937 rng(11);
  TensorType x = f32({2, 32, 17, 17}), w = f32({32, 32, 1, 7}), b = f32({32});
  Tensor tx = randomTensor(x, rng), tw = randomTensor(w, rng), tb = randomTensor(b, rng);
  Attrs base = convAttrs({1, 1}, {0, 3, 0, 3}, {1, 1}, 1);
  Tensor addend = randomTensor(x, rng); // the output's shape: 'same' padding
  for (int variant = 0; variant < 4; ++variant) {
    bool relu = variant & 1, sum = variant & 2;
    SCOPED_TRACE(std::string(relu ? "relu" : "") + (sum ? " sum" : ""));
    Attrs a = base;
    if (relu)
      a.set("activation", std::string("relu"));
    std::vector<TensorType> types{x, w, b};
    std::vector<Tensor> inputs{tx, tw, tb};
    if (sum) {
      a.set("sum", (int64_t)1);
      types.push_back(x);
      inputs.push_back(addend);
    }
    auto node = mustMakeNode(Op::Conv, types, a);
    std::vector<PrimitiveInfo> ran;
    auto direct = runOnce(*node->node, inputs, ConvAlgorithm::Direct);
    auto ours = runOnce(*node->node, inputs, ConvAlgorithm::Auto, ran);
    // (With the addend copied into the output by a reorder beside it.)
    EXPECT_TRUE(llvm::any_of(ran, [](const PrimitiveInfo &p) {
      return llvm::StringRef(p.implementation).startswith("graphc_wino1d");
    }));
    ASSERT_EQ(direct.size(), 1u);
    ASSERT_EQ(ours.size(), 1u);
    // Both round: twice the sums' K·u, and the transforms' growth.
    double worst = 0, bound = kernelBound(*node->node, ran, 2);
    EXPECT_TRUE(near(ours[0], direct[0], bound, &worst)) << worst;
    sumbound::report("our Winograd with fused post-ops against oneDNN's", worst, bound);
    if (relu) {
      int64_t negative = 0;
      for (int64_t i = 0; i < ours[0].numElements(); ++i)
        negative += ours[0].at(i) < 0;
      EXPECT_EQ(negative, 0);
    }
  }
}

// inception_v3's Mixed_5b 3x3 (64 -> 96 channels at 35x35), batch 4: the
// three directions by Winograd against the direct ones, within both sides'
// rounding bound (kernelBound).
TEST(ConvAlgorithm, WinogradAgreesWithDirect) {
  if (!cpuHasWinograd())
    GTEST_SKIP() << "oneDNN has no Winograd convolution on this CPU";
  auto c = convNodes(f32({4, 64, 35, 35}), f32({96, 64, 3, 3}), {1, 1, 1, 1});
  for (int d = 0; d < 3; ++d) {
    SCOPED_TRACE(opName(c.nodes[d]->node->op()).str());
    std::vector<PrimitiveInfo> ran;
    auto direct = runOnce(*c.nodes[d]->node, c.inputs[d], ConvAlgorithm::Direct);
    auto winograd = runOnce(*c.nodes[d]->node, c.inputs[d], ConvAlgorithm::Winograd, ran);
    ASSERT_EQ(direct.size(), 1u);
    ASSERT_EQ(winograd.size(), 1u);
    double worst = 0, bound = kernelBound(*c.nodes[d]->node, ran, 2);
    EXPECT_TRUE(near(winograd[0], direct[0], bound, &worst));
    sumbound::report(opName(c.nodes[d]->node->op()).str() + ", oneDNN's Winograd against direct",
                     worst, bound);
  }
}

} // namespace
