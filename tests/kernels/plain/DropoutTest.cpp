// DropoutTrain: masks are a function of (seed, node name without the tower
// prefix, tower, step), keep about 1 - ratio, and scale kept values by
// 1/(1 - ratio); the thread count does not change them.
#include "PlainTestUtil.h"

#include "kernels/DropoutKey.h"
#include "kernels/cpu/CpuBackend.h"

using namespace graphc;

namespace {

/// A module holding one DropoutTrain node.
struct DropoutGraph {
  Module m;
  Node *node = nullptr;

  DropoutGraph(llvm::StringRef name, int tower, double ratio, Dims shape = {64, 50},
               DType dtype = DType::F32) {
    Builder b(m.main());
    b.setTower(tower);
    Attrs a;
    a.set("ratio", ratio);
    node = b.createNode(Op::DropoutTrain, {b.input("x", TensorType(dtype, shape))}, a, name);
  }

  /// (y, mask) for x at this step and seed.
  std::vector<Tensor> run(const Tensor &x, uint64_t step, uint64_t seed) const {
    return mustRun(*node, {x}, step, seed);
  }
};

Tensor ones(Dims shape) {
  Tensor t(TensorType(DType::F32, shape));
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = 1;
  return t;
}

} // namespace

TEST(PlainDropout, SameSeedStepAndTowerGiveTheSameMask) {
  DropoutGraph a("drop", 0, 0.5), b("drop", 0, 0.5);
  Tensor x = randomTensor({64, 50}, 1);
  auto first = a.run(x, 3, 42), second = b.run(x, 3, 42);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(first[1], second[1]);
  EXPECT_EQ(first[0], second[0]);
}

TEST(PlainDropout, StepTowerAndSeedEachChangeTheMask) {
  Tensor x = ones({64, 50});
  DropoutGraph t0("drop", 0, 0.5), t1("drop", 1, 0.5), other("other", 0, 0.5);
  Tensor base = t0.run(x, 0, 7)[1];
  EXPECT_NE(base, t0.run(x, 1, 7)[1]) << "step";
  EXPECT_NE(base, t1.run(x, 0, 7)[1]) << "tower";
  EXPECT_NE(base, t0.run(x, 0, 8)[1]) << "seed";
  EXPECT_NE(base, other.run(x, 0, 7)[1]) << "node";
}

// Gradient accumulation: each micro-batch of an update draws its own masks;
// micro-batch 0 draws the step's masks without accumulation.
TEST(PlainDropout, MicroStepsOfAnUpdateDrawTheirOwnMasks) {
  const uint64_t key = 0x5eed;
  EXPECT_EQ(dropoutStepKey(key, 3), dropoutStepKey(key, 3, 0));
  EXPECT_NE(dropoutStepKey(key, 3, 0), dropoutStepKey(key, 3, 1));
  EXPECT_NE(dropoutStepKey(key, 3, 1), dropoutStepKey(key, 3, 2));
  EXPECT_NE(dropoutStepKey(key, 3, 1), dropoutStepKey(key, 4, 1));
}

TEST(PlainDropout, TowerPrefixOfTheNameIsNotPartOfTheKey) {
  Tensor x = ones({64, 50});
  DropoutGraph plain("block/drop", 1, 0.5), prefixed("tower_1/block/drop", 1, 0.5),
      compact("tower1/block/drop", 1, 0.5), prefixedTower0("tower_0/block/drop", 0, 0.5);
  Tensor m = plain.run(x, 2, 5)[1];
  EXPECT_EQ(m, prefixed.run(x, 2, 5)[1]);
  EXPECT_EQ(m, compact.run(x, 2, 5)[1]);
  EXPECT_NE(m, prefixedTower0.run(x, 2, 5)[1]) << "towers must draw differently";
}

TEST(PlainDropout, KeepsAboutOneMinusRatioAndScalesKeptValues) {
  for (double ratio : {0.1, 0.3, 0.8}) {
    DropoutGraph g("drop", 0, ratio, {400, 500});
    Tensor x = randomTensor({400, 500}, 9);
    auto out = g.run(x, 0, 1);
    ASSERT_EQ(out.size(), 2u);
    float scale = (float)(1.0 / (1.0 - ratio));
    int64_t kept = 0, n = x.numElements();
    for (int64_t i = 0; i < n; ++i) {
      float m = out[1].data<float>()[i];
      ASSERT_TRUE(m == 0 || m == scale) << "mask value " << m;
      kept += m != 0;
      ASSERT_EQ(out[0].data<float>()[i], x.data<float>()[i] * m);
    }
    // 200000 Bernoulli draws: the standard deviation of the fraction is < 0.0012.
    EXPECT_NEAR((double)kept / n, 1 - ratio, 0.006) << "ratio " << ratio;
  }
}

TEST(PlainDropout, RatioZeroKeepsEverythingAndOneDropsEverything) {
  Tensor x = randomTensor({10, 10}, 2);
  DropoutGraph keep("drop", 0, 0.0, {10, 10}), drop("drop", 0, 1.0, {10, 10});
  auto k = keep.run(x, 0, 0), d = drop.run(x, 0, 0);
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(k[0].at(i), x.at(i));
    EXPECT_EQ(k[1].at(i), 1.0);
    EXPECT_EQ(d[0].at(i), 0.0);
    EXPECT_EQ(d[1].at(i), 0.0);
  }
}

TEST(PlainDropout, ThreadCountDoesNotChangeTheMask) {
  DropoutGraph g("drop", 0, 0.5, {300, 1000});
  Tensor x = ones({300, 1000});
  int saved = cpuThreads();
  setCpuThreads(1);
  Tensor one = g.run(x, 4, 11)[1];
  setCpuThreads(2);
  Tensor two = g.run(x, 4, 11)[1];
  setCpuThreads(saved);
  EXPECT_EQ(one, two);
}

TEST(PlainDropout, HalfPrecisionMasksMatchF32) {
  DropoutGraph f32("drop", 0, 0.5, {8, 700}), f16("drop", 0, 0.5, {8, 700}, DType::F16);
  Tensor x16(TensorType(DType::F16, {8, 700}));
  for (int64_t i = 0; i < x16.numElements(); ++i)
    x16.set(i, 1.5);
  Tensor m32 = f32.run(ones({8, 700}), 1, 3)[1];
  auto out16 = f16.run(x16, 1, 3);
  for (int64_t i = 0; i < x16.numElements(); ++i) {
    ASSERT_EQ(out16[1].at(i), m32.at(i));
    ASSERT_EQ(out16[0].at(i), 1.5 * m32.at(i));
  }
}
