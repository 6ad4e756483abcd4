//===- CompileTest.cpp - Pipelines, the inference compile, the choice of strategy ===//

#include "StrategyTestUtil.h"

#include "ir/Builder.h"
#include "ir/Clone.h"
#include "ir/Printer.h"
#include "passes/FuseBatchNormRelu.h"
#include "passes/InferenceFusion.h"
#include "passes/strategy/Compile.h"
#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/CompiledModule.h"

using namespace graphc;
using namespace graphc::strategytest;

namespace {

std::string nameOf(const CompileRequest &req, const PlacementRequest &place) {
  auto s = strategyFor(req, place);
  return s ? (*s)->name().str() : "error: " + llvm::toString(s.takeError());
}

TEST(CompileStrategy, TheRequestPicksTheStrategy) {
  CompileRequest req = request();
  PlacementRequest place;
  EXPECT_EQ(nameOf(req, place), "data-parallel");
  place.ps = 1;
  EXPECT_EQ(nameOf(req, place), "parameter-server") << "on the host too";
  place.gpus = 2;
  EXPECT_EQ(nameOf(req, place), "parameter-server");
  req.options.params = ParamPlacement{ParamPlacement::Auto};
  EXPECT_EQ(nameOf(req, place), "params-auto");
  place.strategy = Strategy::ModelParallel;
  EXPECT_EQ(nameOf(req, place), "model-parallel");
  place.gpus = 0; // without devices, the host's plan
  EXPECT_EQ(nameOf(req, place), "parameter-server");
  place.ps = 0;
  EXPECT_EQ(nameOf(req, place), "data-parallel");
}

TEST(Compile, TrainingRunsTheGivenPipelineAndKeepsTheForwardModel) {
  auto forward = model();
  TempDir dir;
  CompileRequest req = request(4);
  req.pipeline = "bind-batch,training-mode,verify";
  req.dump.dumpDir = dir.str();
  auto m = compileTraining(*forward, req);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  EXPECT_EQ(dumpedPasses(dir), (std::vector<std::string>{"bind-batch", "training-mode", "verify"}));
  auto kept = forwardOf(**m);
  ASSERT_TRUE(bool(kept)) << llvm::toString(kept.takeError());
  EXPECT_EQ(toText(**kept), toText(*forward));
}

/// x -> Conv -> Relu (output): one pair for fuse-conv-relu.
std::unique_ptr<Module> convRelu() {
  auto m = std::make_unique<Module>("conv_relu");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 3, 8, 8}));
  Variable w;
  w.name = "w";
  w.type = TensorType(DType::F32, {4, 3, 3, 3});
  w.kind = VarKind::Param;
  w.init = {"zeros", {}};
  Value *conv = b.create(Op::Conv, {x, b.newVariable(std::move(w))}, {}, "conv");
  m->main().addOutput(b.create(Op::Relu, {conv}, {}, "relu"));
  return m;
}

TEST(Compile, InferenceFusesThroughTheInferencePipeline) {
  auto forward = convRelu();
  auto m = compileInference(*forward, 0);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_EQ((*m)->main().numNodes(), 3u) << toText(**m); // input, variable, conv
  for (const Node *n : (*m)->main().nodes()) {
    if (n->op() == Op::Conv) {
      EXPECT_EQ(n->attrs().getString("activation"), "relu");
    }
  }
  // The same as the fusions called one by one.
  std::unique_ptr<Module> byHand = cloneModule(*forward);
  fuseConvAdd(*byHand);
  EXPECT_EQ(fuseConvRelu(*byHand), 1u);
  fuseBatchNormRelu(*byHand);
  fusePadIntoAveragePool(*byHand);
  EXPECT_EQ(toText(**m), toText(*byHand));
}

TEST(Compile, TheInferencePipelinesPassesAreDumpedLikeAnyOther) {
  auto m = convRelu();
  TempDir dir;
  DumpOptions dump;
  dump.dumpDir = dir.str();
  ASSERT_EQ(errorOf(runPipelines(*m, CompileOptions(), dump, {kDefaultInferencePipeline})), "");
  EXPECT_EQ(dumpedPasses(dir), namesOf(kDefaultInferencePipeline));
  EXPECT_EQ(dir.text("0003.after_fuse-conv-relu.gir"), toText(*m));
}

TEST(Compile, InferenceBindsTheBatch) {
  auto forward = model();
  auto m = compileInference(*forward, 3);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  EXPECT_EQ((*m)->batch(), 3);
  EXPECT_FALSE(forward->batch().has_value()) << "the forward model is left as it was";
}

} // namespace
