//===- LayoutTest.cpp - Blocked views give the plain views' numbers --------===//
//
// For every oneDNN kernel that takes nChw16c, every combination of layouts it
// accepts (operands and results independently) must give the numbers of the
// all-plain run; results and scratch start as NaN so unwritten elements show.
// Also: which values may be blocked, scratch sizing after prepare(), and
// errors for attributes the kernels cannot run.
//
//===----------------------------------------------------------------------===//

#include "tests/kernels/dnnl/DnnlTestUtil.h"

#include "kernels/cpu/CpuBackend.h"

#include <cmath>

using namespace graphc;
using namespace graphc::test;

namespace {

using LayoutPair = std::pair<std::vector<Layout>, std::vector<Layout>>;

Attrs attrs(std::initializer_list<std::pair<const char *, Attribute>> list) {
  Attrs a;
  for (auto &[k, v] : list)
    a.set(k, v);
  return a;
}

struct Case {
  const char *name;
  Op op;
  std::vector<TensorType> inputs;
  Attrs attrs;
};

std::vector<Case> blockedCases() {
  Ints pad1{1, 1, 1, 1};
  Attrs conv = attrs({{"pads", pad1}});
  Attrs dataAttrs = conv, filterAttrs = conv;
  dataAttrs.set("input_shape", Ints{2, 32, 7, 7});
  filterAttrs.set("filter_shape", Ints{16, 32, 3, 3});
  Attrs maxPool = attrs({{"kernel_shape", Ints{3, 3}},
                         {"strides", Ints{2, 2}},
                         {"pads", pad1},
                         {"ceil_mode", (int64_t)1}});
  Attrs avgPool = maxPool;
  avgPool.set("count_include_pad", (int64_t)1); // windows overhang at the end
  Attrs avgGrad = avgPool;
  avgGrad.set("input_shape", Ints{1, 16, 10, 10});
  Attrs eps = attrs({{"epsilon", 1e-3}});
  TensorType c16 = f32({16}), c32 = f32({32});
  return {
      {"conv", Op::Conv, {f32({2, 32, 7, 7}), f32({16, 32, 3, 3}), c16}, conv},
      {"conv_rgb",
       Op::Conv,
       {f32({2, 3, 9, 9}), f32({16, 3, 3, 3})},
       attrs({{"strides", Ints{2, 2}}})},
      {"conv_grad_data", Op::ConvGradData, {f32({2, 16, 7, 7}), f32({16, 32, 3, 3})}, dataAttrs},
      {"conv_grad_filter",
       Op::ConvGradFilter,
       {f32({2, 32, 7, 7}), f32({2, 16, 7, 7})},
       filterAttrs},
      {"max_pool", Op::MaxPool, {f32({2, 16, 9, 9})}, maxPool},
      {"max_pool_grad", Op::MaxPoolGrad, {f32({2, 16, 9, 9}), f32({2, 16, 5, 5})}, maxPool},
      {"avg_pool", Op::AveragePool, {f32({1, 16, 10, 10})}, avgPool},
      {"avg_pool_grad", Op::AveragePoolGrad, {f32({1, 16, 6, 6})}, avgGrad},
      {"global_avg_pool", Op::GlobalAveragePool, {f32({2, 32, 5, 5})}, {}},
      {"batch_norm", Op::BatchNorm, {f32({2, 16, 4, 4}), c16, c16, c16, c16}, eps},
      {"batch_norm_train", Op::BatchNormTrain, {f32({2, 32, 3, 3}), c32, c32}, eps},
      {"batch_norm_train_grad",
       Op::BatchNormTrainGrad,
       {f32({2, 32, 3, 3}), c32, c32, c32, f32({2, 32, 3, 3})},
       eps},
  };
}

/// Every combination of layouts the kernel accepts, all-plain first.
std::vector<LayoutPair> layoutCombinations(const Kernel &k, const Node &n) {
  std::vector<LayoutPair> all{{{}, {}}};
  auto expand = [&](bool blocked, bool operand) {
    size_t count = all.size();
    for (size_t i = 0; i < count; ++i) {
      auto &list = operand ? all[i].first : all[i].second;
      list.push_back(Layout::Plain);
      if (blocked) {
        LayoutPair b = all[i];
        (operand ? b.first : b.second).back() = Layout::Blocked;
        all.push_back(std::move(b));
      }
    }
  };
  for (unsigned i = 0; i < n.numOperands(); ++i)
    expand(k.acceptsLayout(i, Layout::Blocked), true);
  for (unsigned i = 0; i < n.numResults(); ++i)
    expand(k.producesLayout(i, Layout::Blocked), false);
  return all;
}

std::string describe(const LayoutPair &p) {
  std::string s;
  for (Layout l : p.first)
    s += l == Layout::Plain ? 'p' : 'B';
  s += " -> ";
  for (Layout l : p.second)
    s += l == Layout::Plain ? 'p' : 'B';
  return s;
}

TEST(DnnlLayout, BlockedViewsMatchPlain) {
  std::mt19937 rng(5);
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

    auto probe = KernelHarness::create(*node->node);
    ASSERT_TRUE(bool(probe)) << llvm::toString(probe.takeError());
    std::vector<LayoutPair> combos = layoutCombinations((*probe)->kernel(), *node->node);
    EXPECT_GT(combos.size(), 1u) << "takes no blocked value";
    for (const LayoutPair &layouts : combos) {
      SCOPED_TRACE(describe(layouts));
      auto h = KernelHarness::create(*node->node, layouts);
      ASSERT_TRUE(bool(h)) << llvm::toString(h.takeError());
      auto out = (*h)->run(in);
      ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
      for (size_t i = 0; i < plain.size(); ++i)
        EXPECT_TRUE(near((*out)[i], plain[i], 1e-5)) << "result " << i;
    }
  }
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
  // Convolutions of the shapes we train (all three directions) compute in
  // exactly that layout, so they ask for it.
  for (int64_t c : {32, 64, 192}) {
    SCOPED_TRACE(c);
    Attrs pads = attrs({{"pads", Ints{1, 1, 1, 1}}});
    auto fwd = mustMakeNode(Op::Conv, {f32({4, c, 17, 17}), f32({c, c, 3, 3})}, pads);
    auto k = kernelFor(*fwd->node);
    ASSERT_TRUE(k);
    EXPECT_EQ(k->preferredOperandLayout(0), Layout::Blocked);
    EXPECT_EQ(k->preferredResultLayout(0), Layout::Blocked);
    EXPECT_EQ(k->preferredOperandLayout(1), std::nullopt) << "weights stay plain";
    auto data = mustMakeNode(Op::ConvGradData, {f32({4, c, 17, 17}), f32({c, c, 3, 3})},
                             attrs({{"pads", Ints{1, 1, 1, 1}}, {"input_shape", Ints{4, c, 17, 17}}}));
    k = kernelFor(*data->node);
    ASSERT_TRUE(k);
    EXPECT_EQ(k->preferredOperandLayout(0), Layout::Blocked);
    EXPECT_EQ(k->preferredResultLayout(0), Layout::Blocked);
    auto filter = mustMakeNode(Op::ConvGradFilter, {f32({4, c, 17, 17}), f32({4, c, 17, 17})},
                               attrs({{"pads", Ints{1, 1, 1, 1}}, {"filter_shape", Ints{c, c, 3, 3}}}));
    k = kernelFor(*filter->node);
    ASSERT_TRUE(k);
    EXPECT_EQ(k->preferredOperandLayout(0), Layout::Blocked);
    EXPECT_EQ(k->preferredOperandLayout(1), Layout::Blocked);
  }
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
  auto pool = mustMakeNode(Op::MaxPool, {f32({2, 24, 6, 6})}, attrs({{"kernel_shape", Ints{2, 2}}}));
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
