//===- SyntheticTest.cpp - Generated data: deterministic and learnable ----===//
#include "executor/data/DataLoader.h"
#include "executor/data/OpenDataset.h"
#include "executor/data/SyntheticDataset.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace graphc;

namespace {

std::vector<float> sample(const Dataset &ds, int64_t index, int64_t *labelOut = nullptr) {
  std::vector<float> px(ds.shape().numElements());
  int64_t label = -1;
  EXPECT_FALSE(bool(ds.load(index, px.data(), label)));
  if (labelOut)
    *labelOut = label;
  return px;
}

/// The pattern of `label` stretched over the image, as the generator does.
std::vector<float> stretchedPattern(const SyntheticDataset &ds, int64_t label) {
  SampleShape s = ds.shape();
  llvm::ArrayRef<float> pat = ds.pattern(label);
  std::vector<float> out(s.numElements());
  for (int64_t c = 0; c < s.channels; ++c)
    for (int64_t y = 0; y < s.height; ++y)
      for (int64_t x = 0; x < s.width; ++x)
        out[(c * s.height + y) * s.width + x] =
            pat[(c * ds.gridRows() + y * ds.gridRows() / s.height) * ds.gridCols() +
                x * ds.gridCols() / s.width];
  return out;
}

double squaredDistance(llvm::ArrayRef<float> a, llvm::ArrayRef<float> b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d += (a[i] - b[i]) * (double)(a[i] - b[i]);
  return d;
}

} // namespace

TEST(Synthetic, DeterministicPerSeedAndIndex) {
  SyntheticDataset a({3, 20, 30}, 100, 7, /*seed=*/5, Split::Train);
  SyntheticDataset b({3, 20, 30}, 100, 7, /*seed=*/5, Split::Train);
  SyntheticDataset otherSeed({3, 20, 30}, 100, 7, /*seed=*/6, Split::Train);
  SyntheticDataset test({3, 20, 30}, 100, 7, /*seed=*/5, Split::Test);
  for (int64_t i : {0, 1, 42, 99}) {
    int64_t la = -1, lb = -1, lt = -1;
    std::vector<float> pa = sample(a, i, &la);
    EXPECT_EQ(pa, sample(b, i, &lb));
    EXPECT_EQ(la, lb);
    EXPECT_EQ(la, i % 7);
    EXPECT_NE(pa, sample(otherSeed, i));
    // The test split: the same classes and patterns, fresh noise.
    std::vector<float> pt = sample(test, i, &lt);
    EXPECT_EQ(lt, la);
    EXPECT_NE(pt, pa);
    EXPECT_EQ(test.pattern(lt), a.pattern(la));
  }
  EXPECT_NE(sample(a, 3), sample(a, 10)); // same class, different noise
}

TEST(Synthetic, UnitVarianceAroundTheClassPattern) {
  SyntheticDataset ds({3, 64, 64}, 64, 10, 1, Split::Train);
  double sum = 0, sq = 0, noiseSq = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < 64; ++i) {
    int64_t label = 0;
    std::vector<float> px = sample(ds, i, &label);
    std::vector<float> pat = stretchedPattern(ds, label);
    for (size_t k = 0; k < px.size(); ++k) {
      sum += px[k];
      sq += px[k] * (double)px[k];
      noiseSq += (px[k] - pat[k]) * (double)(px[k] - pat[k]);
      ++n;
    }
  }
  double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.15);
  EXPECT_NEAR(noiseSq / n, 0.5, 0.01); // noise is half the variance
}

TEST(Synthetic, NearestPatternClassifiesHeldOutSamples) {
  // 1000 classes at a small shape: the class patterns differ enough that the
  // nearest pattern names the class of every test-split sample.
  SyntheticDataset train({3, 16, 16}, 2000, 1000, 3, Split::Train);
  SyntheticDataset test({3, 16, 16}, 2000, 1000, 3, Split::Test);
  std::vector<std::vector<float>> patterns;
  for (int64_t c = 0; c < 1000; ++c)
    patterns.push_back(stretchedPattern(train, c));
  int correct = 0;
  for (int64_t i = 0; i < 100; ++i) {
    int64_t label = 0;
    std::vector<float> px = sample(test, i * 13, &label);
    int64_t best = -1;
    double bestD = 1e300;
    for (int64_t c = 0; c < 1000; ++c) {
      double d = squaredDistance(px, patterns[c]);
      if (d < bestD) {
        bestD = d;
        best = c;
      }
    }
    correct += best == label;
  }
  EXPECT_EQ(correct, 100);
}

TEST(Synthetic, SoftmaxRegressionLossFallsWithinTensOfSteps) {
  // The cheapest model that could learn it: a linear softmax classifier fed
  // by the loader, trained with plain SGD.
  const int64_t classes = 10, batch = 32;
  const SampleShape shape{3, 16, 16};
  const int64_t d = shape.numElements();
  DatasetOptions opts;
  opts.shape = shape;
  opts.classes = classes;
  opts.samples = 4096;
  auto ds = openDataset("synthetic", opts);
  ASSERT_TRUE(bool(ds));
  LoaderOptions lo;
  lo.batch = batch;
  auto loader = DataLoader::create(std::move(*ds), lo);
  ASSERT_TRUE(bool(loader));
  std::vector<double> w(classes * d, 0.0), grad(classes * d);
  const double lr = 0.01;
  double firstLoss = 0, lastLoss = 0;
  for (int step = 0; step < 30; ++step) {
    auto b = (*loader)->next();
    ASSERT_TRUE(bool(b) && b->has_value());
    const float *x = (*b)->inputs.data<float>();
    const int64_t *y = (*b)->labels.data<int64_t>();
    std::fill(grad.begin(), grad.end(), 0.0);
    double loss = 0;
    for (int64_t s = 0; s < batch; ++s) {
      double logits[classes], maxLogit = -1e300, total = 0;
      for (int64_t c = 0; c < classes; ++c) {
        logits[c] = 0;
        for (int64_t k = 0; k < d; ++k)
          logits[c] += w[c * d + k] * x[s * d + k];
        maxLogit = std::max(maxLogit, logits[c]);
      }
      for (double &l : logits)
        total += std::exp(l - maxLogit);
      loss += -(logits[y[s]] - maxLogit - std::log(total)) / batch;
      for (int64_t c = 0; c < classes; ++c) {
        double p = std::exp(logits[c] - maxLogit) / total - (c == y[s] ? 1.0 : 0.0);
        for (int64_t k = 0; k < d; ++k)
          grad[c * d + k] += p * x[s * d + k] / batch;
      }
    }
    for (size_t k = 0; k < w.size(); ++k)
      w[k] -= lr * grad[k];
    if (step == 0)
      firstLoss = loss;
    lastLoss = loss;
  }
  EXPECT_NEAR(firstLoss, std::log(10.0), 1e-6);
  EXPECT_LT(lastLoss, 0.2) << "first " << firstLoss;
}
