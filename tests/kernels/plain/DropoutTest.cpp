// DropoutTrain: masks are a function of (seed, node name without the tower
// prefix, tower, step), keep about 1 - ratio, and scale kept values by
// 1/(1 - ratio); the thread count does not change them. Per-sample masks
// (stochastic depth, `mask = sample`): one value per sample, [N,1,...],
// the element mask of N values, constant over the sample.
#include "PlainTestUtil.h"

#include "kernels/DropoutKey.h"

#include "kernels/cpu/CpuBackend.h"
#include <cmath>
#include <cstdio>

using namespace graphc;

namespace {

/// A module holding one DropoutTrain node.
struct DropoutGraph {
  Module m;
  Node *node = nullptr;

  DropoutGraph(llvm::StringRef name, int tower, double ratio, Dims shape = {64, 50},
               DType dtype = DType::F32, llvm::StringRef mask = "") {
    Builder b(m.main());
    b.setTower(tower);
    Attrs a;
    a.set("ratio", ratio);
    if (!mask.empty())
      a.set("mask", mask.str());
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

//===-- Per-sample masks (stochastic depth) --------------------------------===//

namespace {

/// A per-sample DropoutTrain over [samples, 3, 5, 7].
DropoutGraph perSample(llvm::StringRef name, int tower, double ratio, int64_t samples,
                       DType dtype = DType::F32) {
  return DropoutGraph(name, tower, ratio, {samples, 3, 5, 7}, dtype, "sample");
}

/// Checks the mask has one value per sample, 0 or `scale`, and y is x times
/// it within each sample; returns how many samples were kept.
int64_t checkPerSample(const Tensor &x, const std::vector<Tensor> &out, float scale) {
  const TensorType &mt = out[1].type();
  EXPECT_EQ(mt.shape, (Dims{x.type().shape[0], 1, 1, 1}));
  int64_t samples = x.type().shape[0], inner = x.numElements() / samples, kept = 0;
  for (int64_t s = 0; s < samples; ++s) {
    double m = out[1].at(s);
    EXPECT_TRUE(m == 0 || m == (double)scale) << "sample " << s << " mask " << m;
    kept += m != 0;
    for (int64_t i = s * inner; i < (s + 1) * inner; ++i)
      if (out[0].at(i) != (double)(float)(x.at(i) * (double)scale) * (m != 0)) {
        ADD_FAILURE() << "sample " << s << " element " << i << ": " << out[0].at(i) << " for x "
                      << x.at(i) << " and mask " << m;
        return kept;
      }
  }
  return kept;
}

} // namespace

TEST(PlainDropout, PerSampleMaskIsOneValuePerSample) {
  for (int64_t samples : {1, 2, 7, 64, 4097}) {
    DropoutGraph g = perSample("block/drop_path", 0, 0.3, samples);
    Tensor x = randomTensor({samples, 3, 5, 7}, 4);
    auto out = g.run(x, 2, 21);
    ASSERT_EQ(out.size(), 2u);
    checkPerSample(x, out, (float)(1.0 / 0.7));
  }
}

TEST(PlainDropout, PerSampleMaskIsTheElementMaskOfItsShape) {
  // The N values are the element mask of N elements: the same bits as an
  // element-mask DropoutTrain over [N] under the same name, seed and step.
  for (int64_t samples : {5, 4096, 5000}) {
    DropoutGraph sampled = perSample("drop", 1, 0.4, samples);
    DropoutGraph flat("drop", 1, 0.4, {samples});
    Tensor m = sampled.run(randomTensor({samples, 3, 5, 7}, 5), 3, 9)[1];
    Tensor f = flat.run(ones({samples}), 3, 9)[1];
    ASSERT_EQ(m.numElements(), f.numElements());
    for (int64_t i = 0; i < samples; ++i)
      ASSERT_EQ(m.at(i), f.at(i)) << samples << " samples, sample " << i;
  }
}

TEST(PlainDropout, PerSampleMaskIsDeterministicAndDiffersAcrossStepsAndTowers) {
  Tensor x = randomTensor({64, 3, 5, 7}, 6);
  DropoutGraph a = perSample("drop", 0, 0.5, 64), b = perSample("drop", 0, 0.5, 64),
               t1 = perSample("tower_1/drop", 1, 0.5, 64);
  auto first = a.run(x, 3, 42), again = b.run(x, 3, 42);
  EXPECT_EQ(first[0], again[0]);
  EXPECT_EQ(first[1], again[1]);
  // 64 fair coins agree by chance with probability 2^-64.
  EXPECT_NE(first[1], a.run(x, 4, 42)[1]) << "step";
  EXPECT_NE(first[1], t1.run(x, 3, 42)[1]) << "tower";
  EXPECT_NE(first[1], a.run(x, 3, 43)[1]) << "seed";
}

TEST(PlainDropout, PerSampleKeepRateIsWithinABinomialBound) {
  // 200 steps of 256 samples, for each ratio: 51200 Bernoulli(keep) draws,
  // whose kept count has standard deviation sqrt(n keep (1 - keep)) <= 114;
  // the bound is 5 of those (deterministic seeds: this cannot flake, it
  // fails only when the streams are biased or correlated).
  for (double ratio : {0.025, 0.2, 0.5}) {
    DropoutGraph g = perSample("stage3/drop_path", 0, ratio, 256);
    Tensor x = randomTensor({256, 3, 5, 7}, 7);
    float scale = (float)(1.0 / (1.0 - ratio));
    int64_t kept = 0, n = 0;
    for (uint64_t step = 0; step < 200; ++step) {
      kept += checkPerSample(x, g.run(x, step, 1234), scale);
      n += 256;
    }
    double keep = 1 - ratio, sd = std::sqrt(n * keep * (1 - keep));
    std::printf("[ keep rate] ratio %g: kept %lld of %lld samples, expected %.0f, %.2f standard "
                "deviations (%.1f) away\n",
                ratio, (long long)kept, (long long)n, n * keep, std::fabs(kept - n * keep) / sd,
                sd);
    EXPECT_NEAR((double)kept, n * keep, 5 * sd)
        << "ratio " << ratio << ": kept " << kept << " of " << n;
  }
}

TEST(PlainDropout, PerTensorMaskIsOneValue) {
  Tensor x = randomTensor({6, 3, 5, 7}, 8);
  DropoutGraph g("drop", 0, 0.5, {6, 3, 5, 7}, DType::F32, "tensor");
  int64_t kept = 0;
  for (uint64_t step = 0; step < 64; ++step) {
    auto out = g.run(x, step, 3);
    ASSERT_EQ(out[1].type().shape, (Dims{1, 1, 1, 1}));
    double m = out[1].at(0);
    ASSERT_TRUE(m == 0 || m == 2) << m;
    kept += m != 0;
    for (int64_t i = 0; i < x.numElements(); ++i)
      ASSERT_EQ(out[0].at(i), x.at(i) * m);
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 64);
}

TEST(PlainDropout, PerSampleHalfPrecisionScalesByTheF32Scale) {
  // y = x * (float) 1/keep, rounded once, as element masks do (the CUDA
  // kernel multiplies by the same float, DropoutDevice.h's sampleScale).
  DropoutGraph g = perSample("drop", 0, 0.3, 16, DType::F16);
  Tensor x(TensorType(DType::F16, {16, 3, 5, 7}));
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.set(i, 1.5);
  auto out = g.run(x, 1, 3);
  Tensor want(x.type());
  float scale = dropoutScale(0.3);
  for (int64_t i = 0; i < x.numElements(); ++i)
    want.set(i, out[1].at(i / 105) == 0 ? 0.0 : (double)(1.5f * scale));
  for (int64_t i = 0; i < x.numElements(); ++i)
    ASSERT_EQ(out[0].at(i), want.at(i)) << i;
}

TEST(PlainDropout, PerSampleThreadCountDoesNotChangeTheResult) {
  DropoutGraph g = perSample("drop", 0, 0.5, 3000);
  Tensor x = randomTensor({3000, 3, 5, 7}, 10);
  int saved = cpuThreads();
  setCpuThreads(1);
  auto one = g.run(x, 4, 11);
  setCpuThreads(2);
  auto two = g.run(x, 4, 11);
  setCpuThreads(saved);
  EXPECT_EQ(one[0], two[0]);
  EXPECT_EQ(one[1], two[1]);
}
