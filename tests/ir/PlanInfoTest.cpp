//===- PlanInfoTest.cpp - The plan's typed contract and its text form ----===//
//
// Every field of PlanInfo goes to its key and back; a module's meta line
// prints byte for byte as it was read; unknown keys pass through; kinds,
// ranges and the typed texts (cluster, tasks, modes) are checked where the
// module is read and by the verifier.
//
//===----------------------------------------------------------------------===//

#include "ir/PlanInfo.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

namespace graphc {
namespace {

/// Every field set, to values that differ from their defaults.
PlanInfo everyField() {
  PlanInfo p;
  p.source = "models";
  p.seed = -3; // a uint64 seed's bits
  p.batch = 12;
  p.training = true;
  p.optimizer = "momentum";
  p.towers = 3;
  p.towerBatches = Ints{4, 4, 4};
  p.split = SplitSpec{SplitSpec::Weights, {4, 4, 2.5}};
  p.splitSpeeds = Floats{1, 0.5};
  p.accumulate = 2;
  p.cluster = Cluster::defaultCluster(2);
  p.params = ParamPlacement::onGpu(1);
  p.paramsChosen = "mirrored";
  p.paramsWhy = "--params auto chose mirrored";
  p.paramsAuto = "[]";
  p.strategy = Strategy::ModelParallel;
  p.modelParallel = "{\"step_seconds\":1}";
  p.pipelineStages = 2;
  p.microBatches = 3; // x 1 pipeline: the 3 towers
  p.pipelines = 1;
  p.pipelineSchedule = PipelineSchedule::GPipe;
  p.pipeline = "[]";
  p.precision = Precision::FP16;
  p.lossScale = 65536;
  p.lossScaleInterval = 2000;
  p.workers = 2;
  p.workerTowers = Ints{2, 1};
  p.tasks = TaskCluster::uniform(2, 1, 1);
  p.worker = 1;
  p.workerOffset = 8;
  p.globalBatch = 12;
  p.ps = 1;
  p.psAsync = true;
  p.psVariables = Strings{"fc.weight"};
  p.psOwners = Ints{0};
  p.psTask = 0;
  p.checkpoint.step = 5;
  p.checkpoint.epoch = 1;
  p.checkpoint.epochBatches = 2;
  p.checkpoint.epochSamples = 24;
  p.checkpoint.seed = -1;
  p.checkpoint.batch = 12;
  p.checkpoint.data = "synthetic";
  p.other.set("note", std::string("kept"));
  return p;
}

TEST(PlanInfo, EveryFieldGoesToItsKeyAndBack) {
  PlanInfo p = everyField();
  Attrs a = p.toAttrs();
  // One key per field, the unknown one included: 43 fields and "note".
  EXPECT_EQ(a.entries().size(), 44u);
  EXPECT_EQ(a.getString("pipeline_schedule"), "gpipe");
  EXPECT_EQ(a.getInt("micro_batches"), 3);
  EXPECT_EQ(a.getString("params"), "gpu:1");
  EXPECT_EQ(a.getString("split"), "4,4,2.5");
  EXPECT_EQ(a.getString("precision"), "fp16");
  EXPECT_EQ(a.getString("strategy"), "model-parallel");
  EXPECT_EQ(a.getString("cluster"), clusterToJson(*p.cluster));
  EXPECT_EQ(a.getString("tasks"), tasksToJson(*p.tasks));
  EXPECT_EQ(a.getInt("ps_async"), 1);
  auto back = PlanInfo::fromAttrs(a);
  ASSERT_TRUE((bool)back) << llvm::toString(back.takeError());
  EXPECT_EQ(back->toAttrs(), a);
  EXPECT_TRUE(*back == p);
  EXPECT_EQ(back->params, p.params);
  EXPECT_EQ(back->strategy, Strategy::ModelParallel);
  EXPECT_EQ(back->pipelineSchedule, PipelineSchedule::GPipe);
  EXPECT_EQ(back->cluster->devices().size(), p.cluster->devices().size());
  EXPECT_EQ(back->tasks->numPs(), 1u);
  EXPECT_EQ(back->checkpoint, p.checkpoint);
  EXPECT_EQ(back->other.getString("note"), "kept");
  // Only the integers travel through ONNX metadata.
  const Attrs facts = p.integerFacts();
  for (const auto &[key, value] : facts.entries())
    EXPECT_TRUE(std::holds_alternative<int64_t>(value)) << key;
  EXPECT_EQ(facts.getInt("batch"), 12);
  EXPECT_FALSE(facts.has("cluster"));
}

TEST(PlanInfo, TheMetaLinePrintsAsItWasRead) {
  Module m("m");
  m.plan() = everyField();
  std::string text = toText(m);
  auto parsed = parseModule(text, "m.gir");
  ASSERT_TRUE((bool)parsed) << llvm::toString(parsed.takeError());
  EXPECT_EQ(toText(**parsed), text);
  llvm::Error ok = verify(**parsed);
  EXPECT_FALSE((bool)ok) << llvm::toString(std::move(ok));
  // An even split is written as modeName writes it, and read back.
  m.plan() = PlanInfo();
  m.plan().split = SplitSpec{};
  auto even = parseModule(toText(m), "m.gir");
  ASSERT_TRUE((bool)even) << llvm::toString(even.takeError());
  ASSERT_TRUE((*even)->plan().split);
  EXPECT_EQ((*even)->plan().split->kind, SplitSpec::Even);
}

std::string readError(llvm::StringRef meta) {
  auto m = parseModule(("module m {\n  meta " + meta + "\n}\n").str(), "m.gir");
  return m ? std::string("no error") : llvm::toString(m.takeError());
}

TEST(PlanInfo, KindsRangesAndTypedTextsAreCheckedWhereTheModuleIsRead) {
  EXPECT_NE(readError("towers = -1").find("'towers' must be"), std::string::npos)
      << readError("towers = -1");
  EXPECT_NE(readError("ps_variables = 3").find("'ps_variables'"), std::string::npos);
  EXPECT_NE(readError("loss_scale = \"big\"").find("'loss_scale'"), std::string::npos);
  EXPECT_NE(readError("params = \"gpu:x\"").find("attribute 'params'"), std::string::npos)
      << readError("params = \"gpu:x\"");
  EXPECT_NE(readError("precision = \"fp8\"").find("attribute 'precision'"), std::string::npos);
  EXPECT_NE(readError("strategy = \"sideways\"").find("attribute 'strategy'"), std::string::npos);
  EXPECT_NE(readError("cluster = \"{\"").find("attribute 'cluster'"), std::string::npos)
      << readError("cluster = \"{\"");
  EXPECT_NE(readError("tasks = \"[]\"").find("attribute 'tasks'"), std::string::npos);
  EXPECT_NE(readError("split = \"1,x\"").find("attribute 'split'"), std::string::npos);
  EXPECT_NE(readError("pipeline_schedule = \"2f2b\"").find("attribute 'pipeline_schedule'"),
            std::string::npos);
  EXPECT_NE(readError("micro_batches = 0").find("'micro_batches' must be"), std::string::npos);
  // Keys graphc does not read pass freely, whatever their kind.
  EXPECT_EQ(readError("mine = \"x\", yours = [1, 2]"), "no error");
}

TEST(PlanInfo, TheVerifierHoldsModulesBuiltInMemoryToTheSameRules) {
  Module m("m");
  m.plan().batch = 0;
  llvm::Error e = verify(m);
  ASSERT_TRUE((bool)e);
  EXPECT_NE(llvm::toString(std::move(e)).find("'batch' must be a positive integer"),
            std::string::npos);
  m.plan().batch = 4;
  m.plan().psOwners = Ints{-1};
  llvm::Error owners = verify(m);
  ASSERT_TRUE((bool)owners);
  EXPECT_NE(llvm::toString(std::move(owners)).find("'ps_owners'"), std::string::npos);
  m.plan().psOwners.reset();
  // A pipeline's shape comes whole, and its towers are pipelines x micro-batches.
  m.plan().pipelineStages = 4;
  llvm::Error partial = verify(m);
  ASSERT_TRUE((bool)partial);
  EXPECT_NE(llvm::toString(std::move(partial)).find("go together; 1 of them"), std::string::npos);
  m.plan().microBatches = 8;
  m.plan().pipelines = 2;
  m.plan().pipelineSchedule = PipelineSchedule::OneFOneB;
  m.plan().towers = 8;
  llvm::Error towers = verify(m);
  ASSERT_TRUE((bool)towers);
  EXPECT_NE(
      llvm::toString(std::move(towers)).find("2 pipeline(s) of 8 micro-batches need 16 towers"),
      std::string::npos);
  m.plan().towers = 16;
  EXPECT_FALSE((bool)verify(m));
}

} // namespace
} // namespace graphc
