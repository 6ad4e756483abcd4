//===- LayoutTest.cpp - Blocked views give the plain views' numbers --------===//
//
// For every oneDNN kernel that takes nChw16c (or, under --cpu-layout nhwc,
// channels-last), every combination of layouts it accepts (operands and
// results independently) must give the numbers of the all-plain run; results
// and scratch start as NaN so unwritten elements show.
// Also: which values may be blocked, scratch sizing after prepare(), and
// errors for attributes the kernels cannot run.
//
//===----------------------------------------------------------------------===//

#include "tests/kernels/dnnl/DnnlTestUtil.h"

#include "SumBound.h"
#include "kernels/cpu/CpuBackend.h"
#include "kernels/cpu/CpuIsa.h"

#include <algorithm>
#include <cmath>

using namespace graphc;
using namespace graphc::test;

namespace {

char letter(Layout l) {
  return l == Layout::Plain ? 'p' : l == Layout::Blocked ? 'B' : 'L';
}

std::string describe(const LayoutPair &p) {
  std::string s;
  for (Layout l : p.first)
    s += letter(l);
  s += " -> ";
  for (Layout l : p.second)
    s += letter(l);
  return s;
}

/// Every case in every combination of layouts its kernel takes under
/// `policy` against the all-plain run.
void viewsMatchPlain(CpuLayout policy, Layout expected) {
  std::mt19937 rng(5);
  double worst = 0; // of the bound
  std::string worstCase;
  for (const Case &c : blockedCases()) {
    SCOPED_TRACE(c.name);
    auto node = mustMakeNode(c.op, c.inputs, c.attrs);
    ASSERT_TRUE(node);
    std::vector<Tensor> in;
    for (const TensorType &t : c.inputs)
      in.push_back(randomTensor(t, rng));
    // Variances must be positive.
    unsigned var = c.op == Op::BatchNorm ? 4 : c.op == Op::BatchNormTrainGrad ? 3 : 0;
    for (int64_t i = 0; var && i < in[var].numElements(); ++i)
      in[var].set(i, std::abs(in[var].at(i)) + 0.5);
    std::vector<Tensor> plain = runOnce(*node->node, in);
    ASSERT_EQ(plain.size(), node->node->numResults());

    auto probe = KernelHarness::create(*node->node, std::nullopt, ConvAlgorithm::Auto, policy);
    ASSERT_TRUE(bool(probe)) << llvm::toString(probe.takeError());
    std::vector<LayoutPair> combos = layoutCombinations((*probe)->kernel(), *node->node);
    EXPECT_TRUE(llvm::any_of(combos,
                             [&](const LayoutPair &p) {
                               return llvm::is_contained(p.first, expected) ||
                                      llvm::is_contained(p.second, expected);
                             }))
        << "takes no value in layout " << letter(expected);
    for (const LayoutPair &layouts : combos) {
      SCOPED_TRACE(describe(layouts));
      auto h = KernelHarness::create(*node->node, layouts, ConvAlgorithm::Auto, policy);
      ASSERT_TRUE(bool(h)) << llvm::toString(h.takeError());
      auto out = (*h)->run(in);
      ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
      // Two oneDNN implementations, each summing in its own order: twice
      // the sums' K·u (kernelBound).
      const double bound = kernelBound(*node->node, {}, 2);
      for (size_t i = 0; i < plain.size(); ++i) {
        double err = 0;
        EXPECT_TRUE(near((*out)[i], plain[i], bound, &err)) << "result " << i;
        if (err / bound > worst) {
          worst = err / bound;
          worstCase = std::string(c.name) + ", " + describe(layouts);
        }
      }
    }
  }
  sumbound::report(std::string(layoutName(expected)) + " against plain, share of the bound (" +
                       worstCase + ")",
                   worst, 1);
}

TEST(DnnlLayout, BlockedViewsMatchPlain) {
  viewsMatchPlain(CpuLayout::Blocked, Layout::Blocked);
}

TEST(DnnlLayout, ChannelsLastViewsMatchPlain) {
  viewsMatchPlain(CpuLayout::Nhwc, Layout::ChannelsLast);
}

std::unique_ptr<Kernel> kernelFor(const Node &n) {
  KernelEnv env;
  env.threads = cpuThreads();
  auto k = KernelRegistry::global().create(n, env);
  if (!k) {
    ADD_FAILURE() << llvm::toString(k.takeError());
    return nullptr;
  }
  return std::move(*k);
}

TEST(DnnlLayout, TheBlockIsTheOneTheConvolutionsChoose) {
  // On any x86 CPU oneDNN has channel-blocked convolutions for (AVX2 and up).
  int block = channelBlock();
  ASSERT_TRUE(block == 8 || block == 16) << block;
  // Convolutions of the shapes we train compute in exactly that layout, so
  // they ask for it: all three directions from AVX2 up, the forward alone
  // below (oneDNN's SSE4.1 gradients are plain GEMMs).
  const bool gradients = cpuIsa() >= CpuIsa::Avx2;
  for (int64_t c : {32, 64, 192}) {
    SCOPED_TRACE(c);
    Attrs pads = attrs({{"pads", Ints{1, 1, 1, 1}}});
    auto fwd = mustMakeNode(Op::Conv, {f32({4, c, 17, 17}), f32({c, c, 3, 3})}, pads);
    auto k = kernelFor(*fwd->node);
    ASSERT_TRUE(k);
    EXPECT_EQ(k->preferredOperandLayout(0), Layout::Blocked);
    EXPECT_EQ(k->preferredResultLayout(0), Layout::Blocked);
    EXPECT_EQ(k->preferredOperandLayout(1), std::nullopt) << "weights stay plain";
    auto data =
        mustMakeNode(Op::ConvGradData, {f32({4, c, 17, 17}), f32({c, c, 3, 3})},
                     attrs({{"pads", Ints{1, 1, 1, 1}}, {"input_shape", Ints{4, c, 17, 17}}}));
    k = kernelFor(*data->node);
    ASSERT_TRUE(k);
    if (!gradients)
      continue;
    EXPECT_EQ(k->preferredOperandLayout(0), Layout::Blocked);
    EXPECT_EQ(k->preferredResultLayout(0), Layout::Blocked);
    auto filter =
        mustMakeNode(Op::ConvGradFilter, {f32({4, c, 17, 17}), f32({4, c, 17, 17})},
                     attrs({{"pads", Ints{1, 1, 1, 1}}, {"filter_shape", Ints{c, c, 3, 3}}}));
    k = kernelFor(*filter->node);
    ASSERT_TRUE(k);
    EXPECT_EQ(k->preferredOperandLayout(0), Layout::Blocked);
    EXPECT_EQ(k->preferredOperandLayout(1), Layout::Blocked);
  }
}

TEST(DnnlLayout, UnderNhwcConvolutionsComputeChannelsLastWithAnyChannelCount) {
  // --cpu-layout nhwc (and bf16 on AMX): the convolutions ask for NHWC in all
  // three directions, whatever the channel count (24 is no whole block of
  // 16), and oneDNN's reference code computes none of them. Below AVX2 the
  // gradients are oneDNN's plain GEMMs, as in the blocked layout.
  const bool gradients = cpuIsa() >= CpuIsa::Avx2;
  KernelEnv env;
  env.threads = cpuThreads();
  env.cpuLayout = CpuLayout::Nhwc;
  auto create = [&](const Node &n) {
    auto k = KernelRegistry::global().create(n, env);
    EXPECT_TRUE(bool(k)) << llvm::toString(k.takeError());
    return k ? std::move(*k) : nullptr;
  };
  constexpr Layout kCL = Layout::ChannelsLast;
  for (int64_t c : {3, 24, 64}) {
    SCOPED_TRACE(c);
    Attrs pads = attrs({{"pads", Ints{1, 1, 1, 1}}});
    auto fwd = mustMakeNode(Op::Conv, {f32({4, c, 17, 17}), f32({32, c, 3, 3})}, pads);
    auto k = create(*fwd->node);
    ASSERT_TRUE(k);
    EXPECT_TRUE(k->acceptsLayout(0, kCL));
    EXPECT_FALSE(k->acceptsLayout(0, Layout::Blocked)) << "one layout besides plain";
    EXPECT_FALSE(k->acceptsLayout(1, kCL)) << "weights stay plain";
    EXPECT_EQ(k->preferredOperandLayout(0), kCL);
    EXPECT_EQ(k->preferredResultLayout(0), kCL);
    if (!gradients || c == 3)
      continue;
    auto data =
        mustMakeNode(Op::ConvGradData, {f32({4, 32, 17, 17}), f32({32, c, 3, 3})},
                     attrs({{"pads", Ints{1, 1, 1, 1}}, {"input_shape", Ints{4, c, 17, 17}}}));
    k = create(*data->node);
    ASSERT_TRUE(k);
    EXPECT_EQ(k->preferredOperandLayout(0), kCL);
    EXPECT_EQ(k->preferredResultLayout(0), kCL);
    auto filter =
        mustMakeNode(Op::ConvGradFilter, {f32({4, c, 17, 17}), f32({4, 32, 17, 17})},
                     attrs({{"pads", Ints{1, 1, 1, 1}}, {"filter_shape", Ints{32, c, 3, 3}}}));
    k = create(*filter->node);
    ASSERT_TRUE(k);
    EXPECT_EQ(k->preferredOperandLayout(0), kCL);
    EXPECT_EQ(k->preferredOperandLayout(1), kCL);
  }
  // 2-d values have no channels-last form.
  auto bn = mustMakeNode(Op::BatchNormTrain, {f32({4, 32}), f32({32}), f32({32})}, {});
  auto k = create(*bn->node);
  ASSERT_TRUE(k);
  EXPECT_FALSE(k->acceptsLayout(0, kCL));
}

TEST(DnnlLayout, OnlyActivationsWithWholeChannelBlocksMayBeBlocked) {
  int block = channelBlock();
  auto conv = mustMakeNode(Op::Conv, {f32({2, 3, 9, 9}), f32({16, 3, 3, 3}), f32({16})}, {});
  auto k = kernelFor(*conv->node);
  ASSERT_TRUE(k);
  EXPECT_FALSE(k->acceptsLayout(0, Layout::Blocked)) << "3 channels";
  EXPECT_FALSE(k->acceptsLayout(1, Layout::Blocked)) << "weights stay plain";
  EXPECT_FALSE(k->acceptsLayout(2, Layout::Blocked)) << "bias stays plain";
  EXPECT_TRUE(k->producesLayout(0, Layout::Blocked)) << "16 channels";

  // 24 channels are whole blocks of 8, not of 16.
  auto pool =
      mustMakeNode(Op::MaxPool, {f32({2, 24, 6, 6})}, attrs({{"kernel_shape", Ints{2, 2}}}));
  k = kernelFor(*pool->node);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->acceptsLayout(0, Layout::Blocked), 24 % block == 0) << "block " << block;

  auto bn = mustMakeNode(Op::BatchNormTrain, {f32({4, 32}), f32({32}), f32({32})}, {});
  k = kernelFor(*bn->node);
  ASSERT_TRUE(k);
  EXPECT_FALSE(k->acceptsLayout(0, Layout::Blocked)) << "2-d";
  EXPECT_FALSE(k->producesLayout(1, Layout::Blocked)) << "statistics";

  auto mm = mustMakeNode(Op::MatMul, {f32({2, 16, 4, 4}), f32({2, 16, 4, 4})}, {});
  k = kernelFor(*mm->node);
  ASSERT_TRUE(k);
  EXPECT_FALSE(k->acceptsLayout(0, Layout::Blocked));
  EXPECT_FALSE(k->producesLayout(0, Layout::Blocked));
}

TEST(DnnlLayout, PrepareSizesScratchForTheChosenLayouts) {
  auto conv = mustMakeNode(Op::Conv, {f32({8, 32, 14, 14}), f32({32, 32, 3, 3})},
                           attrs({{"pads", Ints{1, 1, 1, 1}}}));
  auto any = kernelFor(*conv->node), plain = kernelFor(*conv->node),
       blocked = kernelFor(*conv->node);
  ASSERT_TRUE(any && plain && blocked);
  using L = Layout;
  ASSERT_FALSE(bool(plain->prepare({L::Plain, L::Plain}, {L::Plain})));
  ASSERT_FALSE(bool(blocked->prepare({L::Blocked, L::Plain}, {L::Blocked})));
  // A view in another layout than the one oneDNN chose for the primitive is
  // staged through scratch (one activation copy each); the expectation comes
  // from the primitive's own choice on this CPU.
  size_t activation = 8 * 32 * 14 * 14 * sizeof(float);
  auto staged = [&](L view, std::optional<L> chosen) { return chosen == view ? 0 : activation; };
  auto in = plain->preferredOperandLayout(0), out = plain->preferredResultLayout(0);
  ASSERT_TRUE(in && out) << "oneDNN chose a layout that is neither plain nor ours";
  EXPECT_EQ(plain->scratchBytes() - staged(L::Plain, in) - staged(L::Plain, out),
            blocked->scratchBytes() - staged(L::Blocked, in) - staged(L::Blocked, out));
  EXPECT_GE(any->scratchBytes(), plain->scratchBytes());
  EXPECT_GE(any->scratchBytes(), blocked->scratchBytes());

  llvm::Error e = blocked->prepare({L::Plain, L::Blocked}, {L::Plain});
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("operand 1 cannot be in the blocked layout"),
            std::string::npos);
}

TEST(DnnlLayout, UnsupportedAttributesAreErrorsNamingTheNode) {
  auto pool = mustMakeNode(Op::AveragePool, {f32({1, 2, 9, 9})},
                           attrs({{"kernel_shape", Ints{3, 3}}, {"dilations", Ints{2, 2}}}));
  ASSERT_TRUE(pool);
  KernelEnv env;
  auto k = KernelRegistry::global().create(*pool->node, env);
  ASSERT_FALSE(bool(k));
  std::string msg = llvm::toString(k.takeError());
  EXPECT_NE(msg.find("node 'node' (AveragePool)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dilated"), std::string::npos) << msg;

  // ConvGradData's input_shape must give dy under the forward Conv: shape
  // inference refuses it before a kernel is made.
  auto grad = makeNode(Op::ConvGradData, {f32({1, 4, 5, 5}), f32({4, 2, 3, 3})},
                       attrs({{"input_shape", Ints{1, 2, 9, 9}}}));
  ASSERT_FALSE(bool(grad));
  msg = llvm::toString(grad.takeError());
  EXPECT_NE(msg.find("(ConvGradData)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not have the shape [1,4,7,7]"), std::string::npos) << msg;
}

} // namespace
