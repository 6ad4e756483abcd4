//===- ParamsAutoStrategyTest.cpp - The mode by predicted step, without the CLI ===//

#include "StrategyTestUtil.h"

#include "ir/Clone.h"
#include "ir/Printer.h"
#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/DataParallelStrategy.h"
#include "passes/strategy/ParamsAutoStrategy.h"

#include "llvm/Support/JSON.h"

using namespace graphc;
using namespace graphc::strategytest;

namespace {

/// The rows of the plan's candidates (meta params_auto).
std::vector<const llvm::json::Object *> candidates(const llvm::json::Value &rows) {
  std::vector<const llvm::json::Object *> out;
  if (const llvm::json::Array *a = rows.getAsArray())
    for (const llvm::json::Value &v : *a)
      out.push_back(v.getAsObject());
  return out;
}

TEST(ParamsAutoStrategy, ChoosesACandidateAndItsPlanIsThatModesDataParallelPlan) {
  auto forward = model();
  CompileRequest req = request(8);
  req.options.params = ParamPlacement{ParamPlacement::Auto};
  req.options.bucketBytes = 4'000'000;
  PlacementRequest place;
  place.gpus = 2;
  place.searchBuckets = false; // mirrored at --bucket-mb's cap alone
  auto strategy = strategyFor(req, place);
  ASSERT_TRUE(bool(strategy)) << llvm::toString(strategy.takeError());
  EXPECT_EQ((*strategy)->name(), "params-auto");
  auto plan = (*strategy)->compile(*forward, req, place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const PlanInfo &info = (*plan)->plan();
  auto rows = llvm::json::parse(info.paramsAuto.value_or(""));
  ASSERT_TRUE(bool(rows)) << llvm::toString(rows.takeError());
  std::vector<std::string> modes;
  for (const llvm::json::Object *row : candidates(*rows)) {
    ASSERT_NE(row, nullptr);
    modes.push_back(row->getString("mode").getValueOr("").str());
    EXPECT_EQ(row->getString("refused").getValueOr("x"), "") << modes.back();
    EXPECT_GT(row->getNumber("step_seconds").getValueOr(0), 0) << modes.back();
  }
  EXPECT_EQ(modes, (std::vector<std::string>{"cpu", "gpu:0", "spread", "mirrored, 4 MB buckets"}));
  ASSERT_TRUE(info.params.has_value());
  EXPECT_TRUE(llvm::StringRef(info.paramsChosen.value_or("")).startswith(modeName(*info.params)));
  EXPECT_NE(describeParamsChoice(**plan, true).find("--params auto chose"), std::string::npos);
  // Less the choice's record, the plan is the data-parallel plan of that mode.
  std::unique_ptr<Module> chosen = cloneModule(**plan);
  chosen->plan().paramsWhy.reset();
  chosen->plan().paramsChosen.reset();
  chosen->plan().paramsAuto.reset();
  CompileRequest direct = req;
  direct.options.params = *info.params;
  auto same = DataParallelStrategy().compile(*forward, direct, place);
  ASSERT_TRUE(bool(same)) << llvm::toString(same.takeError());
  EXPECT_EQ(toText(*chosen), toText(**same));
}

TEST(ParamsAutoStrategy, WithPsTasksEachCandidateIsAParameterServerPlan) {
  auto forward = model();
  CompileRequest req = request(8);
  req.options.params = ParamPlacement{ParamPlacement::Auto};
  PlacementRequest place;
  place.gpus = 2;
  place.workers = 2;
  place.ps = 1;
  place.searchBuckets = false;
  auto plan = compilePlan(*forward, req, place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ((*plan)->plan().ps, 1);
  // Tasks take their sums from the workers' hosts: only cpu keeps every
  // update there, and the others are refused by the sharding pass.
  EXPECT_EQ((*plan)->plan().paramsChosen, "cpu");
  auto rows = llvm::json::parse((*plan)->plan().paramsAuto.value_or(""));
  ASSERT_TRUE(bool(rows)) << llvm::toString(rows.takeError());
  for (const llvm::json::Object *row : candidates(*rows)) {
    std::string mode = row->getString("mode").getValueOr("").str();
    std::string refused = row->getString("refused").getValueOr("").str();
    if (mode == "cpu")
      EXPECT_EQ(refused, "");
    else
      EXPECT_NE(refused.find("pass 'shard-over-ps'"), std::string::npos) << mode << ": " << refused;
  }
}

} // namespace
