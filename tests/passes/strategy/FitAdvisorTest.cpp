//===- FitAdvisorTest.cpp - Refusals that say what fits, without the CLI ===//
//
// Every way a compile refuses a plan for memory (data parallel, --params
// auto, model parallel, parameter servers, several workers) ends in a
// MemoryMisfit that names each device's need in parts against its memory,
// and the advisor's change is applied here and compiled: it fits.
//
//===----------------------------------------------------------------------===//

#include "StrategyTestUtil.h"

#include "ir/MemoryLimit.h"
#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/CompiledModule.h"
#include "passes/strategy/FitAdvisor.h"
#include "placement/analysis/CostModel.h"
#include "placement/analysis/MemoryPlan.h"
#include "placement/analysis/Schedule.h"

#include <regex>

using namespace graphc;
using namespace graphc::strategytest;

namespace {

/// The budget without its clock: the advice then depends only on the request,
/// however loaded the machine running the tests is.
const FitAdvisorOptions kUntimed{FitAdvisorOptions().maxCompiles, 0};

/// A host of 1 TiB and `gpus` GPUs of `gpuBytes` each, every pair linked.
Cluster gpusOf(unsigned gpus, int64_t gpuBytes) {
  std::vector<ClusterDevice> devices{{"cpu:0", DeviceKind::CPU, 1LL << 40, 1.0}};
  std::vector<Link> links;
  for (unsigned g = 0; g < gpus; ++g) {
    devices.push_back({"gpu:" + std::to_string(g), DeviceKind::GPU, gpuBytes, 1.0});
    links.push_back({"cpu:0", devices.back().name, 64e9});
    for (unsigned h = 0; h < g; ++h)
      links.push_back({"gpu:" + std::to_string(h), devices.back().name, 450e9});
  }
  auto c = Cluster::create(std::move(devices), std::move(links), 1e12, 1e12);
  EXPECT_TRUE(bool(c)) << llvm::toString(c.takeError());
  return std::move(*c);
}

/// The most any GPU of the request's plan needs (on a cluster as large as
/// it takes).
int64_t fullestGpuNeed(const Module &forward, const CompileRequest &req,
                       const PlacementRequest &place) {
  auto plan = compilePlan(forward, req, place);
  EXPECT_TRUE(bool(plan)) << errorOf(plan);
  if (!plan)
    return 0;
  auto needs = memoryNeeds(*runnablePart(**plan));
  EXPECT_TRUE(bool(needs)) << errorOf(needs);
  int64_t most = 0;
  for (const MemoryNeed &n : *needs)
    if (n.kind == DeviceKind::GPU)
      most = std::max(most, n.total());
  return most;
}

/// The misfit a compile refused with (none: the test fails).
std::unique_ptr<MemoryMisfit> misfitOf(llvm::Error e) {
  std::unique_ptr<MemoryMisfit> misfit;
  llvm::handleAllErrors(
      std::move(e), [&](std::unique_ptr<MemoryMisfit> m) { misfit = std::move(m); },
      [&](const llvm::ErrorInfoBase &other) {
        ADD_FAILURE() << "not a misfit: " << other.message();
      });
  return misfit;
}

/// Every device over its memory is named with its parts, whose figures
/// add up to its need, and "and has" its memory.
void expectEachDeviceNamed(const MemoryMisfit &m) {
  const std::string text = m.message();
  unsigned over = 0;
  for (const MemoryNeed &n : m.needs()) {
    EXPECT_EQ(n.total(),
              n.variables + n.slots + n.accumulators + n.activations + n.copies + n.gaps);
    if (n.fits())
      continue;
    ++over;
    EXPECT_NE(text.find(n.text()), std::string::npos) << text;
    EXPECT_NE(text.find(n.device + " needs " + bytesText(n.total()) + " = variables "),
              std::string::npos)
        << text;
    EXPECT_NE(text.find(", and has " + bytesText(n.capacity)), std::string::npos) << text;
  }
  EXPECT_GT(over, 0u) << text;
}

/// Compiles with the advice's cheapest change applied: it fits.
void expectAdviceFits(const Module &forward, const CompileRequest &req,
                      const PlacementRequest &place, const FitAdvice &advice) {
  ASSERT_FALSE(advice.fits.empty()) << advice.text();
  EXPECT_LE(advice.compiles, FitAdvisorOptions().maxCompiles);
  CompileRequest r = req;
  PlacementRequest p = place;
  advice.fits.front().edit.apply(r, p);
  auto plan = compilePlan(forward, r, p);
  ASSERT_TRUE(bool(plan)) << errorOf(plan) << "\n" << advice.text();
  EXPECT_FALSE(bool(checkPlanFitsCluster(**plan))) << advice.text();
}

/// The refusal of compileThatFits, checked, and its advice recomputed.
FitAdvice refusedWithAdvice(const Module &forward, const CompileRequest &req,
                            const PlacementRequest &place) {
  auto plan = compileThatFits(forward, req, place, kUntimed);
  EXPECT_FALSE(bool(plan));
  if (plan)
    return {};
  std::unique_ptr<MemoryMisfit> misfit = misfitOf(plan.takeError());
  if (!misfit)
    return {};
  expectEachDeviceNamed(*misfit);
  EXPECT_NE(misfit->advice().find("would fit with: "), std::string::npos) << misfit->message();
  FitAdvice advice = adviseFit(forward, req, place, *misfit, kUntimed);
  EXPECT_NE(misfit->advice().find(advice.fits.empty() ? "@" : advice.fits.front().edit.flags),
            std::string::npos)
      << misfit->message();
  return advice;
}

TEST(MemoryNeeds, ThePartsAreTheMemoryPlansAndAddUpToTheNeed) {
  auto forward = model("small_cnn");
  for (ParamPlacement mode :
       {ParamPlacement{ParamPlacement::Cpu}, ParamPlacement{ParamPlacement::Mirrored}}) {
    CompileRequest req = request(16);
    req.options.params = mode;
    PlacementRequest place;
    place.gpus = 2;
    auto plan = compilePlan(*forward, req, place);
    ASSERT_TRUE(bool(plan)) << errorOf(plan);
    std::unique_ptr<Module> runnable = runnablePart(**plan);
    const Cluster &cluster = *(*plan)->plan().cluster;
    auto needs = memoryNeeds(*runnable, cluster);
    ASSERT_TRUE(bool(needs)) << errorOf(needs);
    auto cost = estimatePlacementCost(*runnable, cluster);
    ASSERT_TRUE(bool(cost)) << errorOf(cost);
    auto schedule = buildSchedule(runnable->main(), [](const Node &n) {
      return n.assignedDevice().value_or(DeviceId::host()).str();
    });
    ASSERT_TRUE(bool(schedule)) << errorOf(schedule);
    for (const MemoryNeed &n : *needs) {
      SCOPED_TRACE(modeName(mode) + " " + n.device);
      // The variables are the cost model's; the arena is the memory plan's.
      EXPECT_EQ(n.stored(), cost->find(n.device)->variableBytes);
      auto d = llvm::find(schedule->devices, n.device);
      int64_t arena = 0;
      if (d != schedule->devices.end())
        arena = planDeviceMemory(*schedule, (unsigned)(d - schedule->devices.begin()), nullptr)
                    .plan.arenaBytes;
      EXPECT_EQ(n.arena(), arena);
      EXPECT_EQ(n.total(), n.stored() + arena);
      if (n.kind != DeviceKind::GPU)
        continue;
      EXPECT_GT(n.activations, 0);
      // Variables on the host reach each GPU as copies; mirrored, each
      // GPU keeps its replica and its momentum slots.
      if (mode.kind == ParamPlacement::Cpu) {
        EXPECT_GT(n.copies, 0);
        EXPECT_EQ(n.stored(), 0);
      } else {
        // momentum: a slot per parameter; the variables also hold the
        // batch norms' running statistics.
        EXPECT_GT(n.slots, 0);
        EXPECT_LE(n.slots, n.variables);
      }
    }
  }
}

TEST(FitAdvisor, DataParallelRefusalNamesEachDeviceAndAChangeThatFits) {
  auto forward = model("small_cnn");
  CompileRequest req = request(64);
  req.options.params = ParamPlacement{ParamPlacement::Mirrored};
  PlacementRequest place;
  place.gpus = 2;
  const int64_t need = fullestGpuNeed(*forward, req, place);
  place.gpus = 0;
  place.cluster = gpusOf(2, need * 6 / 10);
  FitAdvice advice = refusedWithAdvice(*forward, req, place);
  expectAdviceFits(*forward, req, place, advice);
  // The same update on the same devices comes first.
  ASSERT_FALSE(advice.fits.empty());
  EXPECT_EQ(advice.fits.front().change, FitChange::SameTraining)
      << advice.text() << llvm::join(advice.tried, "; ");
  for (size_t i = 1; i < advice.fits.size(); ++i)
    EXPECT_LE(advice.fits[i - 1].secondsPerSample(), advice.fits[i].secondsPerSample());
}

TEST(FitAdvisor, AccumulationKeepsTheSamplesPerUpdateAndIsTheSmallestThatFits) {
  auto forward = model("small_cnn");
  CompileRequest req = request(64);
  req.options.params = ParamPlacement{ParamPlacement::Cpu};
  PlacementRequest place;
  place.gpus = 1;
  place.towers = 1;
  const int64_t need = fullestGpuNeed(*forward, req, place);
  place.gpus = 0;
  place.cluster = gpusOf(1, need / 3);
  FitAdvice advice = refusedWithAdvice(*forward, req, place);
  expectAdviceFits(*forward, req, place, advice);
  const FitFound *acc = nullptr;
  for (const FitFound &f : advice.fits)
    if (llvm::StringRef(f.edit.flags).contains("--accumulate"))
      acc = &f;
  ASSERT_NE(acc, nullptr) << advice.text();
  EXPECT_EQ(acc->samplesPerUpdate, 64) << acc->edit.flags;
  // The next smaller K does not fit: the search proved it.
  std::smatch k;
  std::string flags = acc->edit.flags;
  ASSERT_TRUE(std::regex_search(flags, k, std::regex("--batch (\\d+) --accumulate (\\d+)")));
  const int64_t micro = std::stoll(k[1]);
  int64_t larger = 0; // the next micro-batch above: 64 / the next smaller divisor
  for (int64_t m = micro + 1; m < 64 && !larger; ++m)
    if (64 % m == 0)
      larger = m;
  if (larger) {
    CompileRequest r = req;
    r.options.batch = larger;
    r.options.accumulate = (unsigned)(64 / larger);
    auto plan = compilePlan(*forward, r, place);
    ASSERT_TRUE(bool(plan)) << errorOf(plan);
    EXPECT_TRUE(bool(checkPlanFitsCluster(**plan))) << "--batch " << larger << " fits too";
  }
}

TEST(FitAdvisor, ParamsAutoRefusal) {
  auto forward = model("small_cnn");
  CompileRequest req = request(64);
  PlacementRequest place;
  place.gpus = 2;
  req.options.params = ParamPlacement{ParamPlacement::Cpu};
  const int64_t need = fullestGpuNeed(*forward, req, place);
  req.options.params = ParamPlacement{ParamPlacement::Auto};
  place.gpus = 0;
  place.cluster = gpusOf(2, need / 2);
  place.searchBuckets = false;
  auto plan = compileThatFits(*forward, req, place, kUntimed);
  ASSERT_FALSE(bool(plan));
  std::unique_ptr<MemoryMisfit> misfit = misfitOf(plan.takeError());
  ASSERT_TRUE(misfit);
  EXPECT_NE(misfit->message().find("--params auto: no parameter mode fits this cluster; the "
                                   "closest, "),
            std::string::npos)
      << misfit->message();
  expectEachDeviceNamed(*misfit);
  FitAdvice advice = adviseFit(*forward, req, place, *misfit, kUntimed);
  expectAdviceFits(*forward, req, place, advice);
  // --params auto tried every mode: the advice changes something else.
  EXPECT_FALSE(llvm::StringRef(advice.fits.front().edit.flags).startswith("--params"));
}

TEST(FitAdvisor, ModelParallelRefusalAndMoreGpusOfAClusterFile) {
  // A deep mlp: its largest colocation group (the first layer's weights
  // and momentum) is a fifth of the replica, so a few devices can hold it.
  models::ModelOptions deep;
  deep.hiddenSizes = std::vector<int64_t>(12, 256);
  auto built = models::buildModel("mlp", deep);
  ASSERT_TRUE(bool(built)) << errorOf(built);
  std::unique_ptr<Module> forward = std::move(*built);
  CompileRequest req = request(1);
  PlacementRequest place;
  place.gpus = 1;
  place.towers = 1;
  CompileRequest onGpu = req;
  onGpu.options.params = ParamPlacement::onGpu(0);
  const int64_t one = fullestGpuNeed(*forward, onGpu, place);
  // Batch 1: no smaller batch, no micro-batches; two GPUs hold a third of
  // the replica each, so only more GPUs fit.
  place = PlacementRequest();
  place.strategy = Strategy::ModelParallel;
  place.cluster = gpusOf(2, one / 3);
  FitAdvice advice = refusedWithAdvice(*forward, req, place);
  expectAdviceFits(*forward, req, place, advice);
  ASSERT_FALSE(advice.fits.empty());
  EXPECT_EQ(advice.fits.front().change, FitChange::MoreDevices);
  std::smatch gpus;
  std::string flags = advice.fits.front().edit.flags;
  ASSERT_TRUE(std::regex_search(flags, gpus, std::regex("^a cluster of (\\d+) GPUs like gpu:0 ")))
      << flags;
  const unsigned n = (unsigned)std::stoul(gpus[1]);
  EXPECT_GE(n, 3u);
  // The fewest: one GPU less does not fit.
  PlacementRequest fewer = place;
  fewer.cluster = gpusOf(n - 1, one / 3);
  auto plan = compilePlan(*forward, req, fewer);
  EXPECT_TRUE(!plan || bool(checkPlanFitsCluster(**plan)));
  if (!plan)
    llvm::consumeError(plan.takeError());
}

/// The first prime from `n`: a batch no micro-batch divides.
int64_t primeFrom(int64_t n) {
  for (;; ++n) {
    bool prime = n > 1;
    for (int64_t d = 2; d * d <= n && prime; ++d)
      prime = n % d != 0;
    if (prime)
      return n;
  }
}

// A pipeline's first stage holds the activations of the micro-batches in
// flight (1F1B: at most S of them): more, smaller micro-batches fit, the
// same update.
TEST(FitAdvisor, APipelineTakesMoreMicroBatches) {
  auto forward = model("small_cnn");
  CompileRequest req = request(256);
  req.options.pipeline.microBatches = 2;
  PlacementRequest place;
  place.strategy = Strategy::Pipeline;
  place.cluster = gpusOf(4, 40LL << 20);
  FitAdvice advice = refusedWithAdvice(*forward, req, place);
  expectAdviceFits(*forward, req, place, advice);
  ASSERT_FALSE(advice.fits.empty());
  EXPECT_EQ(advice.fits.front().change, FitChange::SameTraining)
      << advice.text() << llvm::join(advice.tried, "; ");
  EXPECT_EQ(advice.fits.front().edit.flags.rfind("--micro-batches ", 0), 0u)
      << advice.fits.front().edit.flags;
}

TEST(FitAdvisor, SeveralWorkersTakeMoreWorkers) {
  // mlp on the default cluster's 80 GiB GPUs: a batch of about 2^22 per
  // GPU does not fit; prime, so no micro-batch divides it.
  auto forward = model("mlp");
  PlacementRequest place;
  place.gpus = 1;
  place.workers = 2;
  const int64_t perWorker = 80LL << 30;
  CompileRequest probe = request(4096);
  probe.options.params = ParamPlacement{ParamPlacement::Mirrored};
  const int64_t per4096 = fullestGpuNeed(*forward, probe, place);
  ASSERT_GT(per4096, 0);
  CompileRequest req = probe;
  // per4096: a GPU's need with 2048 samples; 1.25 times a GPU's memory each.
  req.options.batch = primeFrom(4096 * (perWorker * 5 / 4 / per4096));
  FitAdvice advice = refusedWithAdvice(*forward, req, place);
  expectAdviceFits(*forward, req, place, advice);
  ASSERT_FALSE(advice.fits.empty());
  // No mode holds the activations, no micro-batch divides the batch: the
  // fewest workers whose towers share it.
  EXPECT_EQ(advice.fits.front().edit.flags, "--workers 3") << advice.text();
}

TEST(FitAdvisor, ParameterServerRefusal) {
  auto forward = model("mlp");
  PlacementRequest place;
  place.gpus = 2;
  place.ps = 1;
  CompileRequest probe = request(4096);
  const int64_t per4096 = fullestGpuNeed(*forward, probe, place);
  ASSERT_GT(per4096, 0);
  CompileRequest req = probe;
  req.options.batch = 4096 * ((80LL << 30) * 5 / 4 / per4096); // 1.25 times a GPU
  FitAdvice advice = refusedWithAdvice(*forward, req, place);
  expectAdviceFits(*forward, req, place, advice);
}

TEST(FitAdvisor, NothingFitsSaysWhatWasTried) {
  auto forward = model("mlp");
  CompileRequest req = request(8);
  PlacementRequest place;
  place.cluster = gpusOf(2, 1024);
  auto plan = compileThatFits(*forward, req, place, kUntimed);
  ASSERT_FALSE(bool(plan));
  std::unique_ptr<MemoryMisfit> misfit = misfitOf(plan.takeError());
  ASSERT_TRUE(misfit);
  expectEachDeviceNamed(*misfit);
  EXPECT_NE(misfit->advice().find("no change tried fits ("), std::string::npos)
      << misfit->message();
  EXPECT_NE(misfit->advice().find("--batch 2"), std::string::npos) << misfit->message();
}

TEST(MemoryNeeds, AMisfitTellsTheDevicesThatFitInOnePhrase) {
  MemoryNeed over{"gpu:0", 100, 100, 0, 300, 50, 14, 512, DeviceKind::GPU};
  MemoryNeed a{"gpu:1", 100, 100, 0, 100, 0, 0, 512, DeviceKind::GPU};
  MemoryNeed b{"gpu:2", 100, 100, 0, 200, 0, 0, 512, DeviceKind::GPU};
  EXPECT_EQ(over.text(),
            "gpu:0 needs 564 B = variables 100 B + optimizer slots 100 B + peak "
            "activations 300 B + copies 50 B + layout gaps 14 B, and has 512 B (52 B short)");
  EXPECT_EQ(misfitText({over, a, b}),
            over.text() + "; gpu:1, gpu:2 fit (the fullest, gpu:2, needs 400 B of 512 B)");
  EXPECT_EQ(misfitText({a, b}), "");
  EXPECT_FALSE(bool(checkFits({a, b})));
  std::string text = llvm::toString(checkFits({over, a}));
  EXPECT_EQ(text, "the plan does not fit its cluster's memory: " + over.text() +
                      "; gpu:1 fits (300 B of 512 B)");
}

} // namespace

TEST(FitAdvisorBudget, TheClockComesFromTheEnvironmentAndZeroTurnsItOff) {
  auto seconds = [](const char *value) -> std::string {
    if (value)
      setenv("GRAPHC_FIT_ADVICE_SECONDS", value, 1);
    else
      unsetenv("GRAPHC_FIT_ADVICE_SECONDS");
    auto o = FitAdvisorOptions::fromEnvironment();
    unsetenv("GRAPHC_FIT_ADVICE_SECONDS");
    return o ? std::to_string(o->maxSeconds) : llvm::toString(o.takeError());
  };
  EXPECT_EQ(seconds(nullptr), std::to_string(FitAdvisorOptions().maxSeconds));
  EXPECT_EQ(seconds("2.5"), std::to_string(2.5));
  EXPECT_EQ(seconds("0"), std::to_string(0.0));
  for (const char *bad : {"-1", "soon", "", "inf", "nan"})
    EXPECT_EQ(seconds(bad), "GRAPHC_FIT_ADVICE_SECONDS '" + std::string(bad) +
                                "': expected seconds, a number >= 0 (0: no time limit)")
        << bad;
}
