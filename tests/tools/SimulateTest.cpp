// graphc simulate on compiled plans: a data-parallel plan checked against the cost model's lower
// bound; and graphrun calibrate's fit. The simulator's own tests, on hand-built plans, are
// tests/placement/analysis/StepSimulatorTest.cpp.

#include "tools/driver/Simulate.h"

#include "tools/driver/Calibrate.h"
#include "tools/driver/TrainOptions.h"

#include "frontend/models/Models.h"
#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/CompiledModule.h"
#include "placement/analysis/CostModel.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

TEST(Simulate, ACompiledMirroredPlanIsNoFasterThanTheCostModelsBound) {
  auto forward = models::buildModel("small_cnn");
  ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
  CompileRequest req;
  req.options.batch = 64;
  req.options.params = ParamPlacement{ParamPlacement::Mirrored};
  PlacementRequest place;
  place.gpus = 4;
  auto plan = compilePlan(**forward, req, place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  std::unique_ptr<Module> runnable = runnablePart(**plan);
  Cluster cluster = Cluster::defaultCluster(4);
  auto r = simulateStep(*runnable, cluster);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  auto bound = estimatePlacementCost(*runnable, cluster);
  ASSERT_TRUE(bool(bound)) << llvm::toString(bound.takeError());
  EXPECT_GE(r->stepSeconds, bound->stepSeconds);
  ASSERT_EQ(r->devices.size(), 5u);
  for (const SimDevice &d : r->devices) {
    EXPECT_LE(d.computeSeconds, r->stepSeconds) << d.device;
    if (d.device != "cpu:0") {
      EXPECT_GT(d.copies, 0) << d.device << " takes part in the all-reduce";
    }
  }
  // The critical path is contiguous: each node starts as the one that held it back ends.
  ASSERT_FALSE(r->criticalPath.empty());
  EXPECT_EQ(r->criticalPath.front().start, 0.0);
  for (size_t i = 1; i < r->criticalPath.size(); ++i)
    EXPECT_NEAR(r->criticalPath[i].start, r->criticalPath[i - 1].end, 1e-12) << i;
  EXPECT_NEAR(r->criticalPath.back().end, r->stepSeconds, 1e-12);
}

TEST(Calibrate, FitsLaunchAndRatesPerOpClass) {
  // Tiny kernels take 3 us each (the launch); the rest add their work at known rates.
  std::vector<KernelTiming> k{
      {Op::Relu, "cpu:1", 100, 1000, 3 * 3e-6, 3},
      {Op::Add, "cpu:1", 10, 64, 2 * 3e-6, 2},
      {Op::Reshape, "cpu:1", 0, 0, 3e-6, 1},
      {Op::Conv, "cpu:1", 2'000'000'000, 1, 2 * (3e-6 + 0.02), 2},   // 1e11 FLOP/s
      {Op::MatMul, "cpu:1", 100'000'000, 1, 3e-6 + 0.01, 1},         // 1e10 FLOP/s
      {Op::BatchNormTrain, "cpu:1", 1, 400'000'000, 3e-6 + 0.1, 1}}; // 4e9 B/s
  KindCalibration c = fitCalibration(k, "synthetic");
  EXPECT_NEAR(c.launchSeconds, 3e-6, 1e-12);
  EXPECT_NEAR(c.convFlops, 1e11, 1e11 * 1e-9);
  EXPECT_NEAR(c.gemmFlops, 1e10, 1e10 * 1e-9);
  // The memory class also holds the tiny kernels' bytes, with no time left after launches.
  EXPECT_NEAR(c.memoryBytes, (400'000'000 + 3 * 1000 + 2 * 64) / 0.1, 1e3);
  EXPECT_TRUE(c.present());
  EXPECT_EQ(c.measured, "synthetic");
}

} // namespace
