//===- ModelParallelStrategyTest.cpp - One replica spread, without the CLI ===//

#include "StrategyTestUtil.h"

#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/CompiledModule.h"
#include "passes/strategy/ModelParallelStrategy.h"

#include "llvm/Support/JSON.h"

using namespace graphc;
using namespace graphc::strategytest;

namespace {

PlacementRequest modelParallelOn(int gpus) {
  PlacementRequest place;
  place.gpus = gpus;
  place.strategy = Strategy::ModelParallel;
  return place;
}

TEST(ModelParallelStrategy, SpreadsOneReplicaAndRecordsItsSchedule) {
  auto forward = model("small_cnn");
  TempDir dir;
  CompileRequest req = request(16);
  req.dump.dumpDir = dir.str();
  const PlacementRequest place = modelParallelOn(2);
  auto strategy = strategyFor(req, place);
  ASSERT_TRUE(bool(strategy)) << llvm::toString(strategy.takeError());
  EXPECT_EQ((*strategy)->name(), "model-parallel");
  auto plan = (*strategy)->compile(*forward, req, place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const PlanInfo &info = (*plan)->plan();
  EXPECT_EQ(info.strategy, Strategy::ModelParallel);
  EXPECT_FALSE(info.towerBatches.has_value()) << "no towers";
  EXPECT_TRUE(everyNodePlaced(**plan));
  auto schedule = llvm::json::parse(info.modelParallel.value_or(""));
  ASSERT_TRUE(bool(schedule)) << llvm::toString(schedule.takeError());
  ASSERT_NE(schedule->getAsObject(), nullptr);
  EXPECT_GT(schedule->getAsObject()->getNumber("step_seconds").getValueOr(0), 0);
  EXPECT_NE(describeModelParallel(**plan).find("model-parallel (m-ETF)"), std::string::npos);
  // m-ETF runs as place-devices' placer: its schedule is in that pass's dump.
  std::string placed;
  for (const std::string &f : dir.files())
    if (llvm::StringRef(f).endswith(".after_place-devices.gir"))
      placed = dir.text(f);
  EXPECT_NE(placed.find("model_parallel = "), std::string::npos);
  EXPECT_FALSE(bool(checkPlanFitsCluster(**plan)));
}

TEST(ModelParallelStrategy, RefusesTowersAndWorkers) {
  auto forward = model();
  PlacementRequest place = modelParallelOn(2);
  place.towers = 2;
  auto towers = compilePlan(*forward, request(), place);
  EXPECT_NE(errorOf(towers).find("towers (--towers 2) are not combined with it"),
            std::string::npos);
  place.towers.reset();
  place.workers = 2;
  auto workers = compilePlan(*forward, request(), place);
  EXPECT_NE(errorOf(workers).find("several workers or ps tasks are not supported"),
            std::string::npos);
}

} // namespace
