//===- LoaderPartTest.cpp - Workers loading their parts of every batch ----===//
//
// W loaders with parts run on W threads that meet in an in-process
// combination of flags (what MPI does across ranks in graphrun). Put
// together, their rows must be the batches of one loader of the whole batch,
// skipped samples and positions included, while each loads about its share.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "executor/data/DataLoader.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

using namespace graphc;
using graphc::testing::CountingDataset;

namespace {

/// Logical or of the workers' flags, in place: each call waits for the
/// other workers' calls of the same round.
class InProcessOr {
public:
  explicit InProcessOr(int workers) : workers_(workers) {}

  llvm::Error combine(llvm::MutableArrayRef<uint8_t> flags) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t round = round_;
    if (arrived_ == 0)
      pending_.assign(flags.size(), 0);
    if (pending_.size() != flags.size())
      return makeError("workers combine " + llvm::Twine(pending_.size()) + " and " +
                       llvm::Twine(flags.size()) + " flags in the same round");
    for (size_t i = 0; i < flags.size(); ++i)
      pending_[i] |= flags[i];
    if (++arrived_ == workers_) {
      result_ = pending_;
      arrived_ = 0;
      ++round_;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return round_ != round; });
    }
    // The next round cannot finish before this worker joins it.
    std::copy(result_.begin(), result_.end(), flags.begin());
    return llvm::Error::success();
  }

private:
  const int workers_;
  std::mutex mutex_;
  std::condition_variable done_;
  int arrived_ = 0;
  uint64_t round_ = 0;
  std::vector<uint8_t> pending_, result_;
};

/// One epoch as a loader hands it out: each batch's sample ids (pixel 0 of
/// each row) and the position after it.
struct Epoch {
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> positions;
  std::string error;
};

Epoch runEpoch(DataLoader &loader, int64_t epoch, LoaderPosition at = {}) {
  Epoch out;
  loader.startEpoch(epoch, at);
  while (true) {
    auto b = loader.next();
    if (!b) {
      out.error = llvm::toString(b.takeError());
      break;
    }
    if (!b->has_value())
      break;
    std::vector<int64_t> ids;
    for (int64_t r = 0; r < (*b)->samples; ++r) {
      ids.push_back((int64_t)(*b)->inputs.data<float>()[r * 4]);
      EXPECT_EQ((*b)->labels.data<int64_t>()[r], ids.back() % 3);
    }
    out.batches.push_back(ids);
    out.positions.push_back(loader.position().samples);
  }
  return out;
}

/// The workers' rows of every batch (W threads), and what each loaded.
struct Parts {
  std::vector<Epoch> epochs;
  std::vector<int64_t> loaded;
};

Parts runParts(std::shared_ptr<const Dataset> ds, LoaderOptions o, llvm::ArrayRef<int64_t> counts,
               int64_t epoch, LoaderPosition at = {}) {
  InProcessOr exchange((int)counts.size());
  Parts out;
  out.epochs.resize(counts.size());
  out.loaded.resize(counts.size());
  std::vector<std::thread> threads;
  int64_t offset = 0;
  for (size_t w = 0; w < counts.size(); ++w) {
    LoaderOptions mine = o;
    mine.part = LoaderPart{offset, counts[w],
                           [&](llvm::MutableArrayRef<uint8_t> f) { return exchange.combine(f); }};
    offset += counts[w];
    threads.emplace_back([&, w, mine] {
      auto loader = DataLoader::create(ds, mine);
      if (!loader) {
        out.epochs[w].error = llvm::toString(loader.takeError());
        return;
      }
      out.epochs[w] = runEpoch(**loader, epoch, at);
      out.loaded[w] = (*loader)->stats().loaded;
    });
  }
  for (std::thread &t : threads)
    t.join();
  return out;
}

/// Each worker's rows are its part of the whole loader's batches, and its
/// positions the whole loader's.
void expectPartsOf(const Epoch &whole, const Parts &parts, llvm::ArrayRef<int64_t> counts,
                   const std::string &what) {
  int64_t offset = 0;
  for (size_t w = 0; w < counts.size(); ++w) {
    const Epoch &mine = parts.epochs[w];
    ASSERT_EQ(mine.error, "") << what << ", worker " << w;
    ASSERT_EQ(mine.batches.size(), whole.batches.size()) << what << ", worker " << w;
    for (size_t b = 0; b < whole.batches.size(); ++b) {
      std::vector<int64_t> want(whole.batches[b].begin() + offset,
                                whole.batches[b].begin() + offset + counts[w]);
      EXPECT_EQ(mine.batches[b], want) << what << ", worker " << w << ", batch " << b;
    }
    EXPECT_EQ(mine.positions, whole.positions) << what << ", worker " << w;
    offset += counts[w];
  }
}

LoaderOptions options(int64_t batch, int threads) {
  LoaderOptions o;
  o.batch = batch;
  o.seed = 9;
  o.threads = threads;
  return o;
}

} // namespace

TEST(LoaderParts, EachWorkerLoadsOnlyItsShare) {
  auto ds = std::make_shared<CountingDataset>(53);
  const std::vector<int64_t> counts = {4, 3, 3}; // a batch of 10 over 3 workers
  for (int threads : {0, 2}) {
    LoaderOptions o = options(10, threads);
    auto whole = DataLoader::create(ds, o);
    ASSERT_TRUE(bool(whole));
    Epoch all = runEpoch(**whole, 1);
    ASSERT_EQ(all.batches.size(), 5u);
    Parts parts = runParts(ds, o, counts, 1);
    expectPartsOf(all, parts, counts, std::to_string(threads) + " threads");
    if (threads == 0) {
      // Nothing prefetched: exactly the rows handed out, where one loader
      // of the whole batch loads every sample (the short last batch's too).
      EXPECT_EQ((*whole)->stats().loaded, 53);
      EXPECT_EQ(parts.loaded, (std::vector<int64_t>{20, 15, 15}));
    }
  }
}

TEST(LoaderParts, SkippedSamplesGiveTheWholeLoadersBatches) {
  // Runs of broken samples longer than a batch make the window grow several
  // times; a broken sample at the epoch's end shortens the last batch.
  std::set<int64_t> broken = {2, 7, 8, 19, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 80};
  auto ds = std::make_shared<CountingDataset>(83, broken);
  for (std::vector<int64_t> counts : {std::vector<int64_t>{3, 3, 2}, {1, 7}, {2, 2, 2, 2}}) {
    for (int threads : {0, 2}) {
      LoaderOptions o = options(8, threads);
      o.shuffle = counts.size() != 2; // index order keeps the run of 12 together
      auto whole = DataLoader::create(ds, o);
      ASSERT_TRUE(bool(whole));
      for (int64_t e : {0, 1}) {
        Epoch all = runEpoch(**whole, e);
        std::string what = std::to_string(counts.size()) + " workers, " + std::to_string(threads) +
                           " threads, epoch " + std::to_string(e);
        Parts parts = runParts(ds, o, counts, e);
        expectPartsOf(all, parts, counts, what);
        // Skips move every later window, so a worker loads some samples of
        // its neighbours' parts; with nothing prefetched, the workers
        // together still load well under twice the epoch.
        if (threads == 0) {
          int64_t total = 0;
          for (int64_t l : parts.loaded)
            total += l;
          EXPECT_LT(total, 2 * 83) << what;
        }
      }
    }
  }
}

TEST(LoaderParts, RareSkipsCostAFewSamples) {
  // 4 broken samples in 400: each of 4 workers loads about its quarter of
  // the epoch, prefetching included, where loading the whole batch costs
  // each the whole epoch.
  auto ds = std::make_shared<CountingDataset>(400, std::set<int64_t>{17, 150, 151, 333});
  LoaderOptions o = options(40, 2);
  auto whole = DataLoader::create(ds, o);
  ASSERT_TRUE(bool(whole));
  Epoch all = runEpoch(**whole, 0);
  const std::vector<int64_t> counts = {10, 10, 10, 10};
  Parts parts = runParts(ds, o, counts, 0);
  expectPartsOf(all, parts, counts, "4 workers");
  EXPECT_EQ((*whole)->stats().loaded, 400);
  for (size_t w = 0; w < counts.size(); ++w) {
    EXPECT_GE(parts.loaded[w], 90) << "worker " << w;
    EXPECT_LE(parts.loaded[w], 150) << "worker " << w;
  }
}

TEST(LoaderParts, StartingAtAPositionOfTheWholeLoader) {
  // A checkpoint of one process (or of other workers) resumes on workers.
  std::set<int64_t> broken = {1, 5, 6, 7, 30};
  auto ds = std::make_shared<CountingDataset>(41, broken);
  LoaderOptions o = options(6, 2);
  auto whole = DataLoader::create(ds, o);
  ASSERT_TRUE(bool(whole));
  Epoch all = runEpoch(**whole, 3);
  ASSERT_EQ(all.batches.size(), 6u);
  const std::vector<int64_t> counts = {2, 4};
  for (size_t k = 0; k < all.batches.size(); ++k) {
    LoaderPosition at{(int64_t)k + 1, all.positions[k]};
    Parts parts = runParts(ds, o, counts, 3, at);
    Epoch rest;
    rest.batches.assign(all.batches.begin() + k + 1, all.batches.end());
    rest.positions.assign(all.positions.begin() + k + 1, all.positions.end());
    expectPartsOf(rest, parts, counts, "started after batch " + std::to_string(k));
  }
}

TEST(LoaderParts, AnEpochWithNoGoodSampleIsAnErrorOnEveryWorker) {
  std::set<int64_t> broken;
  for (int64_t i = 0; i < 12; ++i)
    broken.insert(i);
  auto ds = std::make_shared<CountingDataset>(12, broken);
  Parts parts = runParts(ds, options(4, 1), {2, 2}, 0);
  for (const Epoch &e : parts.epochs) {
    EXPECT_TRUE(e.batches.empty());
    EXPECT_NE(e.error.find("none of the 12 samples of the epoch could be loaded"),
              std::string::npos)
        << e.error;
  }
}

TEST(LoaderParts, BadPartsAreErrors) {
  auto ds = std::make_shared<CountingDataset>(20);
  LoaderOptions o = options(4, 0);
  auto orNothing = [](llvm::MutableArrayRef<uint8_t>) { return llvm::Error::success(); };
  o.part = LoaderPart{3, 2, orNothing};
  auto l = DataLoader::create(ds, o);
  ASSERT_FALSE(bool(l));
  EXPECT_NE(llvm::toString(l.takeError()).find("rows 3..4 are not a part of a batch of 4"),
            std::string::npos);
  o.part = LoaderPart{0, 2, orNothing};
  o.dropLast = false;
  l = DataLoader::create(ds, o);
  ASSERT_FALSE(bool(l));
  EXPECT_NE(llvm::toString(l.takeError()).find("drops the short last batch"), std::string::npos);
}
