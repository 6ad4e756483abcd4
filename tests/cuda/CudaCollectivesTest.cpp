//===- CudaCollectivesTest.cpp - All-reduce among GPU devices -------------===//
//
// The own reduction (logical devices sharing a GPU) against the CPU engine,
// bit for bit; the host meeting's timeout on a GPU group; NCCL where two
// GPUs exist. Skipped ("no CUDA device") where no GPU is usable.
//
//===----------------------------------------------------------------------===//

#include "CudaTestSupport.h"

#include "executor/Collectives.h"
#include "executor/cuda/CudaCollectives.h"
#include "executor/cuda/CudaStepGraph.h"

#include <cstring>
#include <random>
#include <thread>

using namespace graphc;

namespace {
struct Rank {
  std::unique_ptr<CudaDevice> device;
  std::vector<TensorView> views;        ///< on the GPU
  std::vector<std::vector<float>> host; ///< the same tensors, for the CPU engine
};

/// `ranks` logical devices on the given GPUs, each holding tensors of `sizes`.
std::vector<Rank> makeRanks(const std::vector<int> &ordinals, const std::vector<int64_t> &sizes,
                            std::chrono::milliseconds timeout = std::chrono::minutes(1)) {
  std::vector<Rank> out(ordinals.size());
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 3.f);
  for (size_t r = 0; r < ordinals.size(); ++r) {
    out[r].device = makeGpu(r, ordinals[r], timeout);
    for (int64_t n : sizes) {
      std::vector<float> v(n);
      for (float &x : v)
        x = dist(rng);
      TensorView t;
      t.shape = {n};
      auto p = out[r].device->allocate(n * 4);
      EXPECT_TRUE(bool(p));
      t.data = *p;
      EXPECT_FALSE(out[r].device->copyIn(t.data, v.data(), n * 4));
      out[r].views.push_back(t);
      out[r].host.push_back(std::move(v));
    }
  }
  return out;
}

std::map<std::string, std::vector<Device *>> groupOf(std::vector<Rank> &ranks,
                                                     const std::string &name) {
  std::map<std::string, std::vector<Device *>> g;
  for (Rank &r : ranks)
    g[name].push_back(r.device.get());
  return g;
}
} // namespace

TEST(CudaCollectives, TheOwnReductionMatchesTheCpuEngineBitForBit) {
  GRAPHC_REQUIRE_GPUS(1);
  // Sizes with vector bodies and scalar tails; more tensors than one launch
  // takes (kSumMaxTensors).
  std::vector<int64_t> sizes{1, 3, 1001, 4099, 65536, 7, 8, 9, 10, 250000};
  std::vector<Rank> ranks = makeRanks({0, 0, 0, 0}, sizes);
  auto engine = createCudaCollectives(std::chrono::seconds(30), groupOf(ranks, "grads"));
  ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());
  EXPECT_EQ(static_cast<CudaCollectives &>(**engine).path("grads"), CollectivePath::SharedGpu);

  // The CPU engine on host copies: the reference.
  CpuCollectives cpu(std::chrono::seconds(30));
  std::vector<std::vector<TensorView>> hostViews(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r)
    for (size_t t = 0; t < sizes.size(); ++t) {
      TensorView v;
      v.shape = {sizes[t]};
      v.data = ranks[r].host[t].data();
      hostViews[r].push_back(v);
    }

  for (int call = 0; call < 3; ++call) {
    (*engine)->reset();
    cpu.reset();
    std::vector<std::string> errors(ranks.size());
    std::vector<std::thread> threads;
    for (unsigned r = 0; r < ranks.size(); ++r)
      threads.emplace_back([&, r] {
        Rank &me = ranks[r];
        // In place, as the executor's bucketed all-reduce does.
        if (auto e = (*engine)->allReduce("grads", r, 4, me.views, me.views, "rank", *me.device))
          errors[r] = llvm::toString(std::move(e));
        else if (auto e2 = me.device->synchronize())
          errors[r] = llvm::toString(std::move(e2));
        if (auto e3 = cpu.allReduce("grads", r, 4, hostViews[r], hostViews[r], "rank", *me.device))
          errors[r] += llvm::toString(std::move(e3));
      });
    for (auto &t : threads)
      t.join();
    for (const std::string &e : errors)
      ASSERT_EQ(e, "");
    for (Rank &r : ranks)
      for (size_t t = 0; t < sizes.size(); ++t) {
        std::vector<float> back(sizes[t]);
        ASSERT_FALSE(r.device->copyOut(back.data(), r.views[t].data, sizes[t] * 4));
        EXPECT_EQ(std::memcmp(back.data(), r.host[t].data(), sizes[t] * 4), 0)
            << "call " << call << " tensor " << t;
      }
  }
}

TEST(CudaCollectives, AMissingRankOnAGpuGroupTimesOutNamingIt) {
  GRAPHC_REQUIRE_GPUS(1);
  std::vector<Rank> ranks = makeRanks({0, 0, 0}, {12}, std::chrono::milliseconds(200));
  auto engine = createCudaCollectives(std::chrono::milliseconds(200), groupOf(ranks, "bn/sync"));
  ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (unsigned r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      if (auto e = (*engine)->allReduce("bn/sync", r, 3, ranks[r].views, ranks[r].views,
                                        "node 'ar" + std::to_string(r) + "'", *ranks[r].device))
        errors[r] = llvm::toString(std::move(e));
    });
  for (auto &t : threads)
    t.join();
  for (const std::string &e : errors) {
    EXPECT_NE(e.find("collective 'bn/sync' (AllReduce) #0"), std::string::npos) << e;
    EXPECT_NE(e.find("ranks not arrived: 2"), std::string::npos) << e;
    EXPECT_NE(e.find("f32[12]"), std::string::npos) << e;
  }
  for (Rank &r : ranks)
    EXPECT_FALSE(r.device->synchronize());
}

TEST(CudaCollectives, NcclSumsAcrossTwoGpus) {
  GRAPHC_REQUIRE_GPUS(2);
  std::vector<int64_t> sizes{5, 100000};
  std::vector<Rank> ranks = makeRanks({0, 1}, sizes);
  auto engine = createCudaCollectives(std::chrono::seconds(60), groupOf(ranks, "grads"));
  ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());
  EXPECT_EQ(static_cast<CudaCollectives &>(**engine).path("grads"), CollectivePath::Nccl);
  (*engine)->reset();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (unsigned r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      if (auto e = (*engine)->allReduce("grads", r, 2, ranks[r].views, ranks[r].views, "rank",
                                        *ranks[r].device))
        errors[r] = llvm::toString(std::move(e));
      else if (auto e2 = ranks[r].device->synchronize())
        errors[r] = llvm::toString(std::move(e2));
    });
  for (auto &t : threads)
    t.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  for (Rank &r : ranks)
    for (size_t t = 0; t < sizes.size(); ++t) {
      std::vector<float> back(sizes[t]);
      ASSERT_FALSE(r.device->copyOut(back.data(), r.views[t].data, sizes[t] * 4));
      for (int64_t i = 0; i < sizes[t]; ++i)
        ASSERT_NEAR(back[i], ranks[0].host[t][i] + ranks[1].host[t][i], 1e-5f);
    }
}
