//===- LoaderTest.cpp - Order, determinism, skipping, prefetch, shutdown --===//
#include "TestSupport.h"

#include "executor/data/DataLoader.h"

#include "ir/Diagnostics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

using namespace graphc;
using graphc::testing::CountingDataset;

namespace {

std::unique_ptr<DataLoader> makeLoader(std::shared_ptr<const Dataset> ds, LoaderOptions o) {
  auto l = DataLoader::create(std::move(ds), o);
  EXPECT_TRUE(bool(l)) << llvm::toString(l.takeError());
  return l ? std::move(*l) : nullptr;
}

/// The sample indices of one epoch's batches (pixel 0 of each real row), and
/// checks that each row is consistent and that padding rows are zero.
std::vector<std::vector<int64_t>> epoch(DataLoader &loader, int64_t e) {
  loader.startEpoch(e);
  std::vector<std::vector<int64_t>> batches;
  while (true) {
    auto b = loader.next();
    EXPECT_TRUE(bool(b)) << llvm::toString(b.takeError());
    if (!b || !b->has_value())
      break;
    const Batch &batch = **b;
    EXPECT_EQ(batch.index, (int64_t)batches.size());
    std::vector<int64_t> ids;
    for (int64_t r = 0; r < loader.options().batch; ++r) {
      const float *px = batch.inputs.data<float>() + r * 4;
      int64_t label = batch.labels.data<int64_t>()[r];
      if (r < batch.samples) {
        ids.push_back((int64_t)px[0]);
        EXPECT_EQ(label, ids.back() % 3);
        EXPECT_EQ(px[3], px[0]);
      } else {
        EXPECT_EQ(label, 0);
        EXPECT_EQ(px[0], 0.0f);
      }
    }
    batches.push_back(ids);
  }
  return batches;
}

} // namespace

TEST(DataLoader, BatchesAreConsecutivePositionsOfTheEpochPermutation) {
  auto ds = std::make_shared<CountingDataset>(103);
  LoaderOptions o;
  o.batch = 10;
  o.seed = 7;
  o.dropLast = false;
  auto loader = makeLoader(ds, o);
  std::vector<std::vector<int64_t>> e0 = epoch(*loader, 0);
  ASSERT_EQ(e0.size(), 11u);
  EXPECT_EQ(e0.back().size(), 3u);
  EXPECT_EQ(loader->batchesPerEpoch(), 11);
  // Every sample exactly once, and not in index order.
  std::vector<int64_t> all;
  for (auto &b : e0)
    all.insert(all.end(), b.begin(), b.end());
  std::vector<int64_t> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 103; ++i)
    ASSERT_EQ(sorted[i], i);
  EXPECT_NE(all, sorted);

  // Reshuffled each epoch; the same epoch number gives the same order again.
  std::vector<std::vector<int64_t>> e1 = epoch(*loader, 1);
  EXPECT_NE(e1, e0);
  EXPECT_EQ(epoch(*loader, 0), e0);
  // Another loader with the same seed agrees; another seed does not.
  EXPECT_EQ(epoch(*makeLoader(ds, o), 1), e1);
  o.seed = 8;
  EXPECT_NE(epoch(*makeLoader(ds, o), 1), e1);

  // Without shuffling, index order in every epoch.
  o.shuffle = false;
  auto plain = makeLoader(ds, o);
  for (int64_t e : {0, 3}) {
    auto batches = epoch(*plain, e);
    ASSERT_EQ(batches.size(), 11u);
    for (size_t b = 0; b < batches.size(); ++b)
      for (size_t r = 0; r < batches[b].size(); ++r)
        EXPECT_EQ(batches[b][r], (int64_t)(b * 10 + r));
  }
}

TEST(DataLoader, SameBatchesWhateverTheThreadsAndPrefetch) {
  auto ds = std::make_shared<CountingDataset>(97, std::set<int64_t>{3, 4, 5, 50, 96});
  LoaderOptions o;
  o.batch = 8;
  o.seed = 11;
  o.dropLast = false;
  o.threads = 0;
  auto reference = makeLoader(ds, o);
  std::vector<std::vector<int64_t>> ref0 = epoch(*reference, 0), ref1 = epoch(*reference, 1);
  for (int threads : {1, 2, 5})
    for (int prefetch : {1, 2, 6}) {
      o.threads = threads;
      o.prefetch = prefetch;
      auto loader = makeLoader(ds, o);
      EXPECT_EQ(epoch(*loader, 0), ref0) << threads << " threads, prefetch " << prefetch;
      EXPECT_EQ(epoch(*loader, 1), ref1) << threads << " threads, prefetch " << prefetch;
      EXPECT_EQ(loader->stats().skipped, 10);
    }
}

TEST(DataLoader, SkippedSamplesAreFilledFromTheNextGoodOnes) {
  auto ds = std::make_shared<CountingDataset>(10, std::set<int64_t>{1, 5});
  LoaderOptions o;
  o.batch = 4;
  o.shuffle = false;
  o.dropLast = false;
  auto loader = makeLoader(ds, o);
  EXPECT_EQ(epoch(*loader, 0), (std::vector<std::vector<int64_t>>{{0, 2, 3, 4}, {6, 7, 8, 9}}));
  LoaderStats s = loader->stats();
  EXPECT_EQ(s.batches, 2);
  EXPECT_EQ(s.samples, 8);
  EXPECT_EQ(s.skipped, 2);
  EXPECT_EQ(s.firstSkipped, (std::vector<std::string>{"sample 1 is broken", "sample 5 is broken"}));
  // A second epoch counts the skips again but reports each message once.
  epoch(*loader, 1);
  s = loader->stats();
  EXPECT_EQ(s.skipped, 4);
  EXPECT_EQ(s.firstSkipped.size(), 2u);
}

TEST(DataLoader, DropLastDecidesAboutTheShortBatch) {
  auto ds = std::make_shared<CountingDataset>(10);
  LoaderOptions o;
  o.batch = 4;
  o.shuffle = false;
  o.dropLast = true;
  auto dropping = makeLoader(ds, o);
  EXPECT_EQ(dropping->batchesPerEpoch(), 2);
  EXPECT_EQ(epoch(*dropping, 0), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  // next() keeps saying the epoch is over.
  auto after = dropping->next();
  ASSERT_TRUE(bool(after));
  EXPECT_FALSE(after->has_value());

  o.dropLast = false;
  auto keeping = makeLoader(ds, o);
  EXPECT_EQ(keeping->batchesPerEpoch(), 3);
  // epoch() checks that rows past `samples` are zeros with label 0.
  EXPECT_EQ(epoch(*keeping, 0),
            (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(keeping->stats().samples, 10);

  // A skip that makes the epoch's good samples a multiple of the batch
  // leaves no short batch.
  auto skipping = makeLoader(std::make_shared<CountingDataset>(9, std::set<int64_t>{2}), o);
  EXPECT_EQ(epoch(*skipping, 0), (std::vector<std::vector<int64_t>>{{0, 1, 3, 4}, {5, 6, 7, 8}}));
}

TEST(DataLoader, ConvertsToTheTargetShape) {
  auto ds = std::make_shared<CountingDataset>(6);
  LoaderOptions o;
  o.batch = 3;
  o.shuffle = false;
  o.target = {3, 5, 5};
  auto loader = makeLoader(ds, o);
  auto b = loader->next();
  ASSERT_TRUE(bool(b) && b->has_value());
  EXPECT_EQ((*b)->inputs.shape(), llvm::ArrayRef<int64_t>({3, 3, 5, 5}));
  EXPECT_EQ((*b)->labels.shape(), llvm::ArrayRef<int64_t>({3}));
  // A constant 2×2 plane resized stays constant, in all three channels.
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t k = 0; k < 75; ++k)
      EXPECT_NEAR((*b)->inputs.data<float>()[r * 75 + k], (float)r, 1e-6);

  o.target = {2, 5, 5};
  auto bad = DataLoader::create(ds, o);
  ASSERT_FALSE(bool(bad));
  std::string msg = llvm::toString(bad.takeError());
  EXPECT_NE(msg.find("counting: cannot convert 1-channel samples (1x2x2) to 2 channels"),
            std::string::npos)
      << msg;
}

/// Three channels of 2×3 whose every pixel says where it is:
/// 100 × index + 10 × channel + position.
class PlanesDataset : public Dataset {
public:
  std::string describe() const override { return "planes"; }
  int64_t size() const override { return 4; }
  int64_t numClasses() const override { return 2; }
  SampleShape shape() const override { return {3, 2, 3}; }
  Normalization normalization() const override { return {{0, 0, 0}, {1, 1, 1}}; }
  llvm::Error load(int64_t index, float *pixels, int64_t &label) const override {
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t p = 0; p < 6; ++p)
        pixels[c * 6 + p] = (float)(100 * index + 10 * c + p);
    label = index % 2;
    return llvm::Error::success();
  }
};

TEST(DataLoader, ChannelsLastBatchesAreTheTransposedOnes) {
  auto ds = std::make_shared<PlanesDataset>();
  LoaderOptions o;
  o.batch = 2;
  o.shuffle = false;
  o.channelsLast = true;
  // As the data set has them: straight from its planes.
  auto b = makeLoader(ds, o)->next();
  ASSERT_TRUE(bool(b) && b->has_value());
  EXPECT_EQ((*b)->inputs.shape(), llvm::ArrayRef<int64_t>({2, 2, 3, 3}));
  const float *x = (*b)->inputs.data<float>();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t p = 0; p < 6; ++p)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(x[(n * 6 + p) * 3 + c], (float)(100 * n + 10 * c + p)) << n << " " << p << " " << c;
  // Resized: the channels-first batch, transposed.
  o.target = {3, 4, 5};
  auto last = makeLoader(ds, o)->next();
  o.channelsLast = false;
  auto first = makeLoader(ds, o)->next();
  ASSERT_TRUE(bool(last) && last->has_value() && bool(first) && first->has_value());
  EXPECT_EQ((*last)->inputs.shape(), llvm::ArrayRef<int64_t>({2, 4, 5, 3}));
  const float *l = (*last)->inputs.data<float>(), *f = (*first)->inputs.data<float>();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t p = 0; p < 20; ++p)
        EXPECT_EQ(l[(n * 20 + p) * 3 + c], f[(n * 3 + c) * 20 + p]);
}

TEST(DataLoader, BadOptionsAreErrors) {
  auto ds = std::make_shared<CountingDataset>(6);
  LoaderOptions o;
  o.batch = 0;
  auto l = DataLoader::create(ds, o);
  ASSERT_FALSE(bool(l));
  EXPECT_NE(llvm::toString(l.takeError()).find("batch size 0 must be positive"), std::string::npos);
  o.batch = 2;
  o.prefetch = 0;
  l = DataLoader::create(ds, o);
  ASSERT_FALSE(bool(l));
  llvm::consumeError(l.takeError());
  // Fewer samples than a batch: with dropLast every epoch would be empty.
  o.prefetch = 1;
  o.batch = 7;
  l = DataLoader::create(ds, o);
  ASSERT_FALSE(bool(l));
  EXPECT_NE(llvm::toString(l.takeError()).find("counting: 6 samples do not fill one batch of 7"),
            std::string::npos);
  o.dropLast = false;
  o.shuffle = false;
  l = DataLoader::create(ds, o);
  ASSERT_TRUE(bool(l));
  EXPECT_EQ(epoch(**l, 0), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 4, 5}}));
}

TEST(DataLoader, WaitTimeShowsAnInputBottleneck) {
  // Loading (8 samples × 5 ms per batch) is slower than the consumer.
  auto slow =
      std::make_shared<CountingDataset>(32, std::set<int64_t>{}, std::chrono::microseconds(5000));
  LoaderOptions o;
  o.batch = 8;
  o.threads = 1;
  auto loader = makeLoader(slow, o);
  EXPECT_EQ(epoch(*loader, 0).size(), 4u);
  EXPECT_GT(loader->stats().waitSeconds, 0.1);

  // A slow consumer (30 ms a step) over fast loading (8 × 0.5 ms) only waits
  // for the first batch.
  auto fast =
      std::make_shared<CountingDataset>(80, std::set<int64_t>{}, std::chrono::microseconds(500));
  o.threads = 2;
  auto prefetching = makeLoader(fast, o);
  prefetching->startEpoch(0);
  int batches = 0;
  while (true) {
    auto b = prefetching->next();
    ASSERT_TRUE(bool(b));
    if (!b->has_value())
      break;
    ++batches;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  EXPECT_EQ(batches, 10);
  EXPECT_LT(prefetching->stats().waitSeconds, 0.15) << "the consumer slept 0.3 s";
}

TEST(DataLoader, RestartMidEpochGivesTheWholeNewEpoch) {
  auto slow =
      std::make_shared<CountingDataset>(60, std::set<int64_t>{}, std::chrono::microseconds(1000));
  LoaderOptions o;
  o.batch = 5;
  o.threads = 3;
  o.dropLast = false;
  auto loader = makeLoader(slow, o);
  auto first = loader->next(); // epoch 0 starts; workers run ahead
  ASSERT_TRUE(bool(first) && first->has_value());
  std::vector<std::vector<int64_t>> restarted = epoch(*loader, 5);
  o.threads = 0;
  EXPECT_EQ(epoch(*makeLoader(slow, o), 5), restarted);
}

TEST(DataLoader, StartingAtAPositionContinuesTheEpochExactly) {
  // Broken samples make batches span chunks, so a position can fall inside
  // a chunk; a loader started there must hand out what the first one did.
  auto ds = std::make_shared<CountingDataset>(47, std::set<int64_t>{3, 4, 9, 20, 21, 22, 40});
  for (int threads : {0, 2}) {
    for (bool dropLast : {true, false}) {
      LoaderOptions o;
      o.batch = 4;
      o.threads = threads;
      o.dropLast = dropLast;
      o.seed = 5;
      auto whole = makeLoader(ds, o);
      std::vector<std::vector<int64_t>> all = epoch(*whole, 2);
      for (size_t k = 0; k <= all.size(); ++k) {
        auto first = makeLoader(ds, o);
        first->startEpoch(2);
        for (size_t i = 0; i < k; ++i)
          ASSERT_TRUE(bool(first->next()));
        LoaderPosition at = first->position();
        EXPECT_EQ(at.batches, (int64_t)k);
        auto resumed = makeLoader(ds, o);
        resumed->startEpoch(2, at);
        EXPECT_EQ(resumed->position().samples, at.samples);
        for (size_t i = k; i < all.size(); ++i) {
          auto b = resumed->next();
          ASSERT_TRUE(b && b->has_value()) << "batch " << i << " after a start at " << k;
          EXPECT_EQ((*b)->index, (int64_t)i);
          std::vector<int64_t> ids;
          for (int64_t r = 0; r < (*b)->samples; ++r)
            ids.push_back((int64_t)(*b)->inputs.data<float>()[r * 4]);
          EXPECT_EQ(ids, all[i]) << "batch " << i << " after a start at " << k;
        }
        auto end = resumed->next();
        ASSERT_TRUE(bool(end));
        EXPECT_FALSE(end->has_value()) << "a batch past the end after a start at " << k;
      }
    }
  }
}

TEST(DataLoader, DestructionMidEpochStopsBetweenSamples) {
  // 20 ms a sample: the queued work (4 batches of 5) would take 0.2 s on two
  // threads; stopping between samples takes at most one sample.
  auto slow =
      std::make_shared<CountingDataset>(60, std::set<int64_t>{}, std::chrono::microseconds(20000));
  LoaderOptions o;
  o.batch = 5;
  o.threads = 2;
  o.prefetch = 4;
  auto loader = makeLoader(slow, o);
  auto b = loader->next();
  ASSERT_TRUE(bool(b) && b->has_value());
  auto start = std::chrono::steady_clock::now();
  loader.reset();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 0.15);
}
