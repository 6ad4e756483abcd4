//===- InferenceFusionTest.cpp - fuse-conv-relu, fuse-conv-add, kept weights ===//
//
// A fused Conv -> Relu, and a Conv with its residual Add fused, compute what
// the ops compute apart, on CPU devices, and weights kept between runs
// (KeptOperand, and our Winograd's transformed weights) follow a variable
// written between runs.

#include "PassTestUtil.h"

#include "executor/Executor.h"
#include "ir/Clone.h"
#include "ir/Cost.h"
#include "ir/Verifier.h"
#include "passes/InferenceFusion.h"

#include "SumBound.h"

#include <gtest/gtest.h>

using namespace graphc;
using passtest::addVariable;
using passtest::randomTensor;

namespace {

Value *conv(Builder &b, Value *x, const std::string &name, int64_t in, int64_t out, int64_t kh = 3,
            int64_t kw = 3) {
  Value *w = addVariable(b, name + ".weight", {out, in, kh, kw}, VarKind::Param,
                         {"kaiming_uniform", {2.236}});
  Attrs a;
  a.set("pads", Ints{kh / 2, kw / 2, kh / 2, kw / 2});
  return b.create(Op::Conv, {x, w}, a, name);
}

/// x -> c1 -> relu -> c2 -> relu (output y); c3 of y -> relu, and c3 also
/// into an Add with that relu (output z): two pairs fuse, the third not.
std::unique_ptr<Module> model() {
  auto m = std::make_unique<Module>("convs");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 3, 8, 8}));
  Value *y = b.create(Op::Relu, {conv(b, x, "c1", 3, 8)}, {}, "r1");
  y = b.create(Op::Relu, {conv(b, y, "c2", 8, 8)}, {}, "r2");
  Value *c3 = conv(b, y, "c3", 8, 8);
  Value *r3 = b.create(Op::Relu, {c3}, {}, "r3");
  Value *z = b.create(Op::Add, {r3, c3}, {}, "z");
  m->main().addOutput(y);
  m->main().addOutput(z);
  m->plan().batch = (int64_t)2;
  return m;
}

/// Each output within both runs' rounding of the model's longest sum: a
/// fused convolution adds its addend, bias or ReLU in another place than the
/// ops apart, and other layouts run other implementations, each summing in
/// its own order: twice (K + 4)·u of the output's scale, K the most terms one
/// node of `m` sums (tests/common/SumBound.h).
void expectNear(const std::vector<Tensor> &a, const std::vector<Tensor> &b, Module &m) {
  int64_t k = 1;
  for (const Node *n : m.main().nodes())
    k = std::max(k, sumLength(*n));
  const double rel = 2 * sumbound::bound(k + 4);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t o = 0; o < a.size(); ++o) {
    worst = std::max(worst, sumbound::relativeError(a[o], b[o]));
    EXPECT_TRUE(sumbound::within(a[o], b[o], rel)) << "output " << o;
  }
  sumbound::report(m.name() + ", fused against the ops apart", worst, rel);
}

/// The outputs of one run of `m` on a fresh executor (empty, with a test
/// failure, when it cannot run).
std::vector<Tensor> outputsOf(const Module &m, const llvm::StringMap<Tensor> &feeds,
                              ExecutorOptions o = {}) {
  auto ex = Executor::create(m, o);
  if (!ex) {
    ADD_FAILURE() << llvm::toString(ex.takeError());
    return {};
  }
  auto out = (*ex)->run(feeds);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return {};
  }
  return *out;
}

TEST(InferenceFusion, FusesOnlyAConvWhoseOnlyUserIsARelu) {
  auto m = model();
  EXPECT_EQ(fuseConvRelu(*m), 2u);
  ASSERT_FALSE(verify(*m)) << "verifies";
  unsigned relus = 0, fused = 0;
  for (Node *n : m->main().nodes()) {
    relus += n->op() == Op::Relu;
    fused += n->op() == Op::Conv && n->attrs().getString("activation") == "relu";
  }
  EXPECT_EQ(relus, 1u);
  EXPECT_EQ(fused, 2u);
  EXPECT_EQ(fuseConvRelu(*m), 0u) << "nothing left to fuse";
}

TEST(InferenceFusion, FusedMatchesUnfusedAndFollowsWrittenWeights) {
  auto plain = model();
  auto fused = cloneModule(*plain);
  ASSERT_EQ(fuseConvRelu(*fused), 2u);
  auto a = Executor::create(*plain, {});
  auto b = Executor::create(*fused, {});
  ASSERT_TRUE((bool)a) << llvm::toString(a.takeError());
  ASSERT_TRUE((bool)b) << llvm::toString(b.takeError());
  llvm::StringMap<Tensor> feeds;
  feeds["x"] = randomTensor(TensorType(DType::F32, {2, 3, 8, 8}), 1);
  for (unsigned round = 0; round < 2; ++round) {
    auto ya = (*a)->run(feeds);
    auto yb = (*b)->run(feeds);
    ASSERT_TRUE((bool)ya) << llvm::toString(ya.takeError());
    ASSERT_TRUE((bool)yb) << llvm::toString(yb.takeError());
    expectNear(*ya, *yb, *plain);
  }
  // New weights written into the fused executor: its kept, reordered copy
  // must follow them, as an executor created with those weights computes.
  Tensor w = randomTensor(TensorType(DType::F32, {8, 8, 3, 3}), 7);
  ASSERT_FALSE((*b)->writeVariable("c2.weight", w));
  plain->findVariable("c2.weight")->data = w;
  auto fresh = Executor::create(*plain, {});
  ASSERT_TRUE((bool)fresh) << llvm::toString(fresh.takeError());
  auto want = (*fresh)->run(feeds);
  auto got = (*b)->run(feeds);
  ASSERT_TRUE((bool)want && (bool)got);
  expectNear(*want, *got, *plain);
}

// 1x7 convolutions, which our own Winograd computes (kernels/cpu/Winograd1d.h)
// with the fused ReLU and addend in its output transform and its transformed
// weights kept between runs: the same as unfused, and following a write.
TEST(InferenceFusion, WinogradConvolutionsFuseAndFollowWrittenWeights) {
  auto plain = std::make_unique<Module>("wino");
  Builder b(plain->main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 32, 9, 17}));
  Value *r = b.create(Op::Relu, {conv(b, x, "c1", 32, 32, 1, 7)}, {}, "r1");
  Value *y = b.create(Op::Relu, {b.create(Op::Add, {conv(b, r, "c2", 32, 32, 1, 7), r}, {}, "a2")},
                      {}, "r2");
  plain->main().addOutput(y);
  plain->plan().batch = (int64_t)2;
  auto fused = cloneModule(*plain);
  EXPECT_EQ(fuseConvAdd(*fused), 1u);
  EXPECT_EQ(fuseConvRelu(*fused), 2u);
  llvm::StringMap<Tensor> feeds;
  feeds["x"] = randomTensor(TensorType(DType::F32, {2, 32, 9, 17}), 5);
  auto ex = Executor::create(*fused, {});
  ASSERT_TRUE((bool)ex) << llvm::toString(ex.takeError());
  for (unsigned round = 0; round < 2; ++round) {
    auto got = (*ex)->run(feeds);
    ASSERT_TRUE((bool)got) << llvm::toString(got.takeError());
    expectNear(*got, outputsOf(*plain, feeds), *plain);
  }
  Tensor w = randomTensor(TensorType(DType::F32, {32, 32, 1, 7}), 9);
  ASSERT_FALSE((*ex)->writeVariable("c2.weight", w));
  plain->findVariable("c2.weight")->data = w;
  auto got = (*ex)->run(feeds);
  ASSERT_TRUE((bool)got) << llvm::toString(got.takeError());
  expectNear(*got, outputsOf(*plain, feeds), *plain);
}

/// Two residual blocks: r = relu(c1(x)); y = relu(c2(r) + r), then
/// z = c3(y) + c4(y) (both sides convolutions; the later one takes the
/// other), w = c5(z) + broadcast bias (not fused: another shape), and c6(z)
/// added to z but also an output (not fused).
std::unique_ptr<Module> residualModel() {
  auto m = std::make_unique<Module>("residual");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 8, 6, 6}));
  Value *r = b.create(Op::Relu, {conv(b, x, "c1", 8, 8)}, {}, "r1");
  Value *y =
      b.create(Op::Relu, {b.create(Op::Add, {conv(b, r, "c2", 8, 8), r}, {}, "a2")}, {}, "r2");
  Value *z = b.create(Op::Add, {conv(b, y, "c3", 8, 8), conv(b, y, "c4", 8, 8)}, {}, "a34");
  Value *bias = addVariable(b, "bias", {1, 8, 1, 1}, VarKind::Param, {"uniform", {-1, 1}});
  Value *w = b.create(Op::Add, {conv(b, z, "c5", 8, 8), bias}, {}, "a5");
  Value *c6 = conv(b, z, "c6", 8, 8);
  Value *v = b.create(Op::Add, {c6, z}, {}, "a6");
  m->main().addOutput(w);
  m->main().addOutput(v);
  m->main().addOutput(c6);
  m->plan().batch = (int64_t)2;
  return m;
}

TEST(InferenceFusion, ResidualAddsFuseIntoTheirConvolutionsAndComputeTheSame) {
  auto plain = residualModel();
  auto fused = cloneModule(*plain);
  EXPECT_EQ(fuseConvAdd(*fused), 2u);
  EXPECT_EQ(fuseConvRelu(*fused), 2u); // c1's, and c2's after its addend
  ASSERT_FALSE(verify(*fused)) << "verifies";
  unsigned adds = 0;
  for (Node *n : fused->main().nodes()) {
    adds += n->op() == Op::Add;
    if (n->name() == "c2" || n->name() == "c4") {
      EXPECT_EQ(n->attrs().getInt("sum"), 1) << n->name();
    }
  }
  EXPECT_EQ(adds, 2u) << "the broadcast bias and the Add beside an output stay";
  EXPECT_EQ(fused->main().findNode("c2")->attrs().getString("activation"), "relu");
  EXPECT_EQ(fuseConvAdd(*fused), 0u) << "nothing left to fuse";

  llvm::StringMap<Tensor> feeds;
  feeds["x"] = randomTensor(TensorType(DType::F32, {2, 8, 6, 6}), 3);
  std::vector<Tensor> want = outputsOf(*plain, feeds);
  ASSERT_EQ(want.size(), 3u);
  expectNear(outputsOf(*fused, feeds), want, *plain);
  // Plain layouts: the addend is copied into the output whatever its layout.
  ExecutorOptions plainLayouts;
  plainLayouts.blockedLayouts = false;
  expectNear(outputsOf(*fused, feeds, plainLayouts), want, *plain);
}

/// x -> Pad(0, 1 on every side of H and W) -> AveragePool 3x3 stride 1,
/// and the same Pad with value 1 into another pool (not folded).
std::unique_ptr<Module> padPoolModel(double value) {
  auto m = std::make_unique<Module>("pad_pool");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 3, 7, 7}));
  Attrs p;
  p.set("pads", Ints{0, 0, 1, 1, 0, 0, 1, 1});
  p.set("value", value);
  Attrs a;
  a.set("kernel_shape", Ints{3, 3});
  Value *y = b.create(Op::AveragePool, {b.create(Op::Pad, {x}, p, "pad")}, a, "pool");
  m->main().addOutput(y);
  m->plan().batch = (int64_t)2;
  return m;
}

TEST(InferenceFusion, ZeroPadFoldsIntoAveragePool) {
  for (double value : {0.0, 1.0}) {
    auto plain = padPoolModel(value);
    auto fused = cloneModule(*plain);
    EXPECT_EQ(fusePadIntoAveragePool(*fused), value == 0.0 ? 1u : 0u);
    ASSERT_FALSE(verify(*fused));
    auto a = Executor::create(*plain, {});
    auto b = Executor::create(*fused, {});
    ASSERT_TRUE((bool)a && (bool)b);
    llvm::StringMap<Tensor> feeds;
    feeds["x"] = randomTensor(TensorType(DType::F32, {2, 3, 7, 7}), 3);
    auto ya = (*a)->run(feeds);
    auto yb = (*b)->run(feeds);
    ASSERT_TRUE((bool)ya && (bool)yb);
    EXPECT_EQ((*yb)[0].type(), TensorType(DType::F32, {2, 3, 7, 7}));
    expectNear(*ya, *yb, *plain);
  }
}

TEST(InferenceFusion, OnlyReluIsAFusedActivation) {
  auto m = model();
  for (Node *n : m->main().nodes())
    if (n->op() == Op::Conv)
      n->attrs().set("activation", std::string("tanh"));
  llvm::Error e = verify(*m);
  ASSERT_TRUE((bool)e);
  EXPECT_NE(llvm::toString(std::move(e)).find("activation 'tanh' is not one a Conv fuses"),
            std::string::npos);
}

} // namespace
