//===- ParameterServerStrategyTest.cpp - Shards as a pass, without the CLI ===//

#include "StrategyTestUtil.h"

#include "passes/PsPart.h"
#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/DataParallelStrategy.h"
#include "passes/strategy/ParameterServerStrategy.h"

using namespace graphc;
using namespace graphc::strategytest;

namespace {

PlacementRequest twoWorkersTwoPs() {
  PlacementRequest place;
  place.gpus = 2;
  place.workers = 2;
  place.ps = 2;
  return place;
}

TEST(ParameterServerStrategy, ShardsTheVariablesInTheSamePipelineAsTheDataParallelPlan) {
  auto forward = model();
  TempDir dir;
  CompileRequest req = request(8);
  req.dump.dumpDir = dir.str();
  std::string timings;
  llvm::raw_string_ostream os(timings);
  req.dump.timePasses = true;
  req.dump.printStream = &os;
  const PlacementRequest place = twoWorkersTwoPs();
  auto strategy = strategyFor(req, place);
  ASSERT_TRUE(bool(strategy)) << llvm::toString(strategy.takeError());
  EXPECT_EQ((*strategy)->name(), "parameter-server");
  auto plan = (*strategy)->compile(*forward, req, place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  // Sharding is the pipeline's last pass: dumped and timed like the others.
  ASSERT_FALSE(dumpedPasses(dir).empty());
  EXPECT_EQ(dumpedPasses(dir).back(), "shard-over-ps");
  EXPECT_NE(os.str().find("shard-over-ps"), std::string::npos) << os.str();
  // The shards are those of shardOverPs on the data-parallel plan.
  CompileRequest plain = request(8);
  auto dataParallel = DataParallelStrategy().compile(*forward, plain, place);
  ASSERT_TRUE(bool(dataParallel)) << llvm::toString(dataParallel.takeError());
  EXPECT_FALSE((*dataParallel)->plan().ps.has_value());
  ASSERT_FALSE(bool(shardOverPs(**dataParallel, 2, false)));
  EXPECT_EQ((*plan)->plan().ps, 2);
  EXPECT_EQ((*plan)->plan().psVariables, (*dataParallel)->plan().psVariables);
  EXPECT_EQ((*plan)->plan().psOwners, (*dataParallel)->plan().psOwners);
  EXPECT_EQ((*plan)->plan().psVariables.value_or(Strings{}).size(), 6u) << "mlp's 3 layers";
}

TEST(ParameterServerStrategy, AShardingThePassRefusesIsDumpedAndNamed) {
  auto forward = model();
  TempDir dir;
  CompileRequest req = request(8);
  req.dump.dumpDir = dir.str();
  req.options.params = ParamPlacement{ParamPlacement::Mirrored};
  auto plan = compilePlan(*forward, req, twoWorkersTwoPs());
  std::string error = errorOf(plan);
  EXPECT_NE(error.find("pass 'shard-over-ps'"), std::string::npos) << error;
  EXPECT_NE(error.find("plan with --params cpu"), std::string::npos) << error;
  std::vector<std::string> files = dir.files();
  ASSERT_FALSE(files.empty());
  EXPECT_TRUE(llvm::StringRef(files.back()).endswith(".failed_shard-over-ps.gir")) << files.back();
  EXPECT_NE(error.find(files.back()), std::string::npos) << error;
}

TEST(ParameterServerStrategy, AsynchronousTasksAreRecorded) {
  auto forward = model();
  PlacementRequest place = twoWorkersTwoPs();
  place.psAsync = true;
  auto plan = compilePlan(*forward, request(8), place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_TRUE(planPsAsync(**plan));
}

TEST(ParameterServerStrategy, TheRequestsPsTasksAreChecked) {
  PlacementRequest place = twoWorkersTwoPs();
  place.ps = -1;
  EXPECT_NE(errorOf(checkPsRequest(place)).find("--ps -1: must be at least 0"), std::string::npos);
  place.ps = 0;
  place.psAsync = true;
  auto async = strategyFor(request(), place);
  EXPECT_NE(errorOf(async).find("--ps-async applies to parameter-server tasks"), std::string::npos);
}

} // namespace
