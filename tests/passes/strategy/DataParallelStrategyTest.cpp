//===- DataParallelStrategyTest.cpp - A tower per device, without the CLI ---===//

#include "StrategyTestUtil.h"

#include "ir/Printer.h"
#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/CompiledModule.h"
#include "passes/strategy/DataParallelStrategy.h"

#include <set>

using namespace graphc;
using namespace graphc::strategytest;

namespace {

TEST(DataParallelStrategy, PlacesATowerPerGpuAndRecordsItsDecisionsInThePlan) {
  auto forward = model();
  CompileRequest req = request(8);
  PlacementRequest place;
  place.gpus = 2;
  auto strategy = strategyFor(req, place);
  ASSERT_TRUE(bool(strategy)) << llvm::toString(strategy.takeError());
  EXPECT_EQ((*strategy)->name(), "data-parallel");
  auto plan = (*strategy)->compile(*forward, req, place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const PlanInfo &info = (*plan)->plan();
  EXPECT_EQ(info.towers, 2);
  ASSERT_TRUE(info.cluster.has_value());
  EXPECT_EQ(info.cluster->numGpus(), 2u);
  EXPECT_EQ(info.params, ParamPlacement{ParamPlacement::Cpu});
  EXPECT_FALSE(info.workers.has_value()) << "one worker records none";
  EXPECT_TRUE(everyNodePlaced(**plan));
  std::set<std::optional<DeviceId>> devices;
  for (const Node *n : (*plan)->main().nodes())
    devices.insert(n->assignedDevice());
  EXPECT_EQ(devices, (std::set<std::optional<DeviceId>>{DeviceId::host(), DeviceId::gpu(0),
                                                        DeviceId::gpu(1)}));
  // The forward model travels with the plan, and the input is left alone.
  EXPECT_NE((*plan)->findGraph("forward"), nullptr);
  EXPECT_TRUE(isCompiledForTraining(**plan));
  EXPECT_FALSE(isPlaced(*forward));
  EXPECT_EQ(forward->findGraph("forward"), nullptr);
}

TEST(DataParallelStrategy, EveryPassOfItsPipelinesIsDumpedInOrderWithThePlanRecordedFirst) {
  auto forward = model();
  TempDir dir;
  CompileRequest req = request(8);
  req.dump.dumpDir = dir.str();
  PlacementRequest place;
  place.gpus = 2;
  auto plan = DataParallelStrategy().compile(*forward, req, place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  std::vector<std::string> want = namesOf(kDefaultTrainingPipeline);
  for (const std::string &p : namesOf(kPlacementPipeline))
    want.push_back(p);
  EXPECT_EQ(dumpedPasses(dir), want);
  // The cluster is the strategy's decision, in the plan before the first pass.
  EXPECT_NE(dir.text("0001.after_bind-batch.gir").find("cluster = "), std::string::npos);
  // The last dump is the plan, less the forward graph kept after the pipeline.
  EXPECT_EQ(dir.text(dir.files().back()), toText(*runnablePart(**plan)));
}

TEST(DataParallelStrategy, SplitAutoSharesTheBatchByTheDevicesSpeeds) {
  auto forward = model();
  CompileRequest req = request(8);
  req.options.split = SplitSpec{SplitSpec::Auto, {}};
  PlacementRequest place;
  place.gpus = 2;
  auto plan = DataParallelStrategy().compile(*forward, req, place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ASSERT_TRUE((*plan)->plan().split.has_value());
  EXPECT_EQ((*plan)->plan().split->kind, SplitSpec::Auto);
  EXPECT_EQ((*plan)->plan().splitSpeeds.value_or(Floats{}).size(), 2u);
  EXPECT_EQ((*plan)->plan().towerBatches, (Ints{4, 4})) << "two alike GPUs share evenly";
  EXPECT_NE(describeSplit(**plan).find("--split auto"), std::string::npos);
}

TEST(DataParallelStrategy, WorkersPlanATowerPerGpuOfEach) {
  auto forward = model();
  PlacementRequest place;
  place.gpus = 2;
  place.workers = 2;
  auto plan = DataParallelStrategy().compile(*forward, request(8), place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ((*plan)->plan().towers, 4);
  EXPECT_EQ((*plan)->plan().workers, 2);
  EXPECT_EQ((*plan)->plan().workerTowers, (Ints{2, 2}));
}

TEST(DataParallelStrategy, WithoutDevicesTheHostRunsATowerPerWorker) {
  auto forward = model();
  PlacementRequest place;
  place.workers = 3;
  auto plan = compilePlan(*forward, request(9), place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ((*plan)->plan().towers, 3);
  EXPECT_EQ((*plan)->plan().workerTowers, (Ints{1, 1, 1}));
  EXPECT_FALSE((*plan)->plan().cluster.has_value());
  EXPECT_FALSE(isPlaced(**plan));
}

TEST(DataParallelStrategy, RefusesWhatTheClusterCannotHold) {
  auto forward = model();
  PlacementRequest place;
  place.gpus = 2;
  place.towers = 3;
  auto tooMany = DataParallelStrategy().compile(*forward, request(8), place);
  EXPECT_NE(errorOf(tooMany).find("--towers 3 does not fit the cluster: it has 2 GPUs"),
            std::string::npos);
  place.towers.reset();
  place.workers = 2;
  place.clusterFile = "cluster.json";
  auto clusterFile = DataParallelStrategy().compile(*forward, request(8), place);
  EXPECT_NE(errorOf(clusterFile).find("--cluster with several workers"), std::string::npos);
}

} // namespace
