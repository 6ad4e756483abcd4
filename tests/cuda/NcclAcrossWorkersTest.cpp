//===- NcclAcrossWorkersTest.cpp - One NCCL communicator over workers -----===//
//
// Workers are threads here, exchanging through a hub that stands in for MPI;
// the NCCL calls are the real ones. Without a GPU: worker 0's unique id
// reaches every worker, the ranks are laid out by worker, and creating the
// communicator stops at the first CUDA call with an error naming the group,
// the NCCL ranks and the worker. With GPUs (skipped here): the sum over every
// GPU of every worker against a sum on the host, and a worker that never
// joins an all-reduce ends the other's wait within the timeout.
//
//===----------------------------------------------------------------------===//

#include "CudaTestSupport.h"

#include "executor/cuda/CudaCollectives.h"
#include "executor/cuda/NcclAcrossWorkers.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <random>
#include <thread>

using namespace graphc;

namespace {

/// Rounds of all-to-all byte exchange among `n` worker threads.
class Hub {
public:
  Hub(unsigned n, std::chrono::milliseconds timeout) : n_(n), timeout_(timeout), rounds_(n, 0) {}
  unsigned size() const { return n_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Every worker's bytes of this round, by worker.
  llvm::Expected<std::vector<std::vector<uint8_t>>> exchange(unsigned w,
                                                             std::vector<uint8_t> mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    Round &r = slots_[rounds_[w]++];
    if (r.blobs.empty())
      r.blobs.resize(n_);
    r.blobs[w] = std::move(mine);
    if (++r.arrived == n_)
      cv_.notify_all();
    if (!cv_.wait_for(lock, timeout_, [&] { return r.arrived == n_; }))
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "the hub timed out");
    return r.blobs;
  }

private:
  struct Round {
    std::vector<std::vector<uint8_t>> blobs;
    unsigned arrived = 0;
  };
  unsigned n_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<uint64_t> rounds_;
  std::map<uint64_t, Round> slots_;
};

class ThreadWorker : public CrossWorkerExchange {
public:
  ThreadWorker(Hub &hub, unsigned w) : hub_(hub), w_(w) {}
  unsigned numWorkers() const override { return hub_.size(); }
  unsigned rank() const override { return w_; }
  std::chrono::milliseconds timeout() const override { return hub_.timeout(); }
  llvm::Expected<std::vector<uint64_t>> gather(uint64_t v, llvm::StringRef) override {
    std::vector<uint8_t> mine(8);
    std::memcpy(mine.data(), &v, 8);
    auto all = hub_.exchange(w_, std::move(mine));
    if (!all)
      return all.takeError();
    std::vector<uint64_t> out;
    for (const auto &b : *all) {
      uint64_t x;
      std::memcpy(&x, b.data(), 8);
      out.push_back(x);
    }
    return out;
  }
  llvm::Error broadcast(llvm::MutableArrayRef<uint8_t> bytes, llvm::StringRef) override {
    auto all = hub_.exchange(w_, std::vector<uint8_t>(bytes.begin(), bytes.end()));
    if (!all)
      return all.takeError();
    EXPECT_EQ((*all)[0].size(), bytes.size());
    std::memcpy(bytes.data(), (*all)[0].data(), bytes.size());
    received.assign(bytes.begin(), bytes.end());
    return llvm::Error::success();
  }
  std::vector<uint8_t> received; ///< the last broadcast

private:
  Hub &hub_;
  unsigned w_;
};

const NcclApi *ncclOrNull(std::string &why) {
  auto api = loadNccl();
  if (api)
    return *api;
  why = llvm::toString(api.takeError());
  return nullptr;
}

} // namespace

TEST(NcclAcrossWorkers, WithoutAGpuTheIdReachesEveryWorkerThenTheErrorNamesTheRanks) {
  if (cudaVisibleDeviceCount() > 0)
    GTEST_SKIP() << "a GPU is usable here: the tests below create real communicators";
  std::string why;
  const NcclApi *api = ncclOrNull(why);
  if (!api)
    GTEST_SKIP() << "NCCL is not installed here: " << why;
  // Workers with 1, 2 and 1 GPUs: NCCL ranks 0, 1-2, 3.
  const std::vector<std::vector<int>> gpus{{0}, {0, 1}, {0}};
  Hub hub(3, std::chrono::seconds(30));
  std::vector<std::unique_ptr<ThreadWorker>> workers;
  for (unsigned w = 0; w < 3; ++w)
    workers.push_back(std::make_unique<ThreadWorker>(hub, w));
  std::vector<std::string> errors(3), layoutErrors(3);
  std::vector<NcclRankLayout> layouts(3);
  std::vector<std::vector<uint64_t>> keys(3);
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < 3; ++w)
    threads.emplace_back([&, w] {
      auto l = NcclAcrossWorkers::layoutOf(*workers[w], "grads_0", gpus[w]);
      if (!l) {
        layoutErrors[w] = llvm::toString(l.takeError());
        return;
      }
      layouts[w] = l->first;
      keys[w] = l->second;
      auto c = NcclAcrossWorkers::create(*api, *workers[w], "grads_0", l->first, gpus[w]);
      errors[w] = c ? "created without a GPU" : llvm::toString(c.takeError());
    });
  for (auto &t : threads)
    t.join();
  for (unsigned w = 0; w < 3; ++w)
    ASSERT_EQ(layoutErrors[w], "") << "worker " << w;
  EXPECT_EQ(layouts[0].firstRank, 0u);
  EXPECT_EQ(layouts[1].firstRank, 1u);
  EXPECT_EQ(layouts[2].firstRank, 3u);
  EXPECT_EQ(layouts[1].nranks, 4u);
  // The communicator's key is the same on every worker.
  EXPECT_EQ(keys[0], keys[1]);
  EXPECT_EQ(keys[0], keys[2]);
  // NCCL's id: worker 0's, on every worker.
  ASSERT_EQ(workers[0]->received.size(), sizeof(ncclUniqueId));
  EXPECT_FALSE(llvm::all_of(workers[0]->received, [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(workers[1]->received, workers[0]->received);
  EXPECT_EQ(workers[2]->received, workers[0]->received);
  const char *where[] = {"collective 'grads_0' (NCCL rank 0 of 4, worker 0 of 3)",
                         "collective 'grads_0' (NCCL ranks 1..2 of 4, worker 1 of 3)",
                         "collective 'grads_0' (NCCL rank 3 of 4, worker 2 of 3)"};
  for (unsigned w = 0; w < 3; ++w) {
    EXPECT_NE(errors[w].find(where[w]), std::string::npos) << errors[w];
    EXPECT_NE(errors[w].find("cudaSetDevice"), std::string::npos) << errors[w];
  }
}

TEST(NcclAcrossWorkers, AWorkerWhoseRanksShareAGpuFailsEveryWorker) {
  // Worker 1 folds two ranks onto GPU 0 (--emulate onto fewer GPUs): NCCL
  // would refuse them, so no worker goes on to wait for the others.
  const std::vector<std::vector<int>> gpus{{0}, {0, 0}, {1}};
  Hub hub(3, std::chrono::seconds(30));
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < 3; ++w)
    threads.emplace_back([&, w] {
      ThreadWorker me(hub, w);
      auto l = NcclAcrossWorkers::layoutOf(me, "bn_2", gpus[w]);
      errors[w] = l ? "" : llvm::toString(l.takeError());
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(errors[1], acrossWorkersRefusal("bn_2", gpus[1]));
  EXPECT_NE(errors[1], "");
  for (unsigned w : {0u, 2u})
    EXPECT_EQ(errors[w], "collective 'bn_2': worker 1's ranks share GPUs, which NCCL refuses (its "
                         "error says which)");
}

namespace {
struct WorkerGpus {
  std::vector<std::unique_ptr<CudaDevice>> devices;
  std::vector<std::vector<float>> host; ///< each local rank's tensor
  std::vector<TensorView> views;
};

/// Each worker thread binds the group and its local ranks sum `n` floats
/// (in place); `skip`: a worker that binds but never joins the all-reduce.
std::vector<std::string> runWorkers(const std::vector<std::vector<int>> &gpus, int64_t n,
                                    std::chrono::milliseconds timeout,
                                    std::vector<WorkerGpus> &state, int skip = -1) {
  const unsigned W = gpus.size();
  Hub hub(W, timeout);
  state.clear();
  state.resize(W);
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 2.f);
  for (unsigned w = 0; w < W; ++w)
    for (size_t r = 0; r < gpus[w].size(); ++r) {
      WorkerGpus &s = state[w];
      s.devices.push_back(makeGpu(r, gpus[w][r], std::chrono::minutes(1)));
      s.host.emplace_back(n);
      for (float &x : s.host.back())
        x = dist(rng);
      auto p = s.devices.back()->allocate(n * 4);
      EXPECT_TRUE(bool(p));
      EXPECT_FALSE(s.devices.back()->copyIn(*p, s.host.back().data(), n * 4));
      TensorView v;
      v.shape = {n};
      v.data = *p;
      s.views.push_back(v);
    }
  std::vector<std::string> errors(W);
  std::vector<std::thread> threads;
  // The worker that skips keeps its communicator until the others are done,
  // so that what they meet is silence, not a peer that left.
  std::atomic<bool> othersDone{false};
  for (unsigned w = 0; w < W; ++w)
    threads.emplace_back([&, w] {
      ThreadWorker me(hub, w);
      WorkerGpus &s = state[w];
      std::map<std::string, std::vector<CudaDevice *>> groups;
      for (auto &d : s.devices)
        groups["grads"].push_back(d.get());
      auto engine = CudaCollectives::create(std::chrono::minutes(1), groups, {"grads"}, &me);
      if (!engine) {
        errors[w] = llvm::toString(engine.takeError());
        return;
      }
      EXPECT_EQ((*engine)->path("grads"), CollectivePath::NcclAcrossWorkers);
      if ((int)w == skip) {
        while (!othersDone.load())
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return;
      }
      (*engine)->reset();
      std::vector<std::string> local(s.devices.size());
      std::vector<std::thread> ranks;
      for (unsigned r = 0; r < s.devices.size(); ++r)
        ranks.emplace_back([&, r] {
          if (auto e = (*engine)->allReduce("grads", r, s.devices.size(), {s.views[r]},
                                            {s.views[r]}, "rank", *s.devices[r]))
            local[r] = llvm::toString(std::move(e));
          else if (auto e2 = s.devices[r]->synchronize())
            local[r] = llvm::toString(std::move(e2));
        });
      for (auto &t : ranks)
        t.join();
      for (const std::string &e : local)
        errors[w] += e;
    });
  for (unsigned w = 0; w < W; ++w)
    if ((int)w != skip)
      threads[w].join();
  othersDone.store(true);
  if (skip >= 0)
    threads[skip].join();
  return errors;
}
} // namespace

TEST(NcclAcrossWorkers, SumsOverEveryGpuOfEveryWorker) {
  GRAPHC_REQUIRE_GPUS(1);
  // As many GPUs as there are: 1 worker of 1, 2 workers of 1, or workers of
  // 1 and 2 (heterogeneous); NCCL takes one rank per GPU.
  const int G = cudaVisibleDeviceCount();
  std::vector<std::vector<int>> gpus = G >= 3   ? std::vector<std::vector<int>>{{0}, {1, 2}}
                                       : G == 2 ? std::vector<std::vector<int>>{{0}, {1}}
                                                : std::vector<std::vector<int>>{{0}};
  const int64_t n = 100003;
  std::vector<WorkerGpus> state;
  std::vector<std::string> errors = runWorkers(gpus, n, std::chrono::seconds(60), state);
  for (const std::string &e : errors)
    ASSERT_EQ(e, "");
  std::vector<double> sum(n, 0.0);
  for (const WorkerGpus &s : state)
    for (const auto &h : s.host)
      for (int64_t i = 0; i < n; ++i)
        sum[i] += h[i];
  for (WorkerGpus &s : state)
    for (size_t r = 0; r < s.devices.size(); ++r) {
      std::vector<float> back(n);
      ASSERT_FALSE(s.devices[r]->copyOut(back.data(), s.views[r].data, n * 4));
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(back[i], sum[i], 1e-5 * std::max(1.0, std::abs(sum[i]))) << i;
    }
}

TEST(NcclAcrossWorkers, AWorkerThatNeverJoinsEndsTheOthersWaitWithinTheTimeout) {
  GRAPHC_REQUIRE_GPUS(2);
  std::vector<WorkerGpus> state;
  std::vector<std::string> errors =
      runWorkers({{0}, {1}}, 1000, std::chrono::seconds(2), state, /*skip=*/1);
  EXPECT_EQ(errors[1], "");
  EXPECT_NE(errors[0].find("the NCCL all-reduce of collective 'grads' on NCCL rank 0 of 2 (worker "
                           "0 of 2) did not complete within 2 s"),
            std::string::npos)
      << errors[0];
}
