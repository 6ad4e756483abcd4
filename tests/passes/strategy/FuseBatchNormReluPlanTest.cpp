//===- FuseBatchNormReluPlanTest.cpp - Which plans fuse batch-norm gradients ===//
//
// The strategies turn on fuse-bn-relu's gradient half (passes/FuseBatchNormRelu.h)
// for plans on GPUs and only there: inception_v3's placed plans fuse every
// batch norm in both halves in fp32, fp16 and bf16; the host's plan fuses the
// forward half only.
//
//===----------------------------------------------------------------------===//

#include "StrategyTestUtil.h"

#include "passes/strategy/CompilePlan.h"

using namespace graphc;
using namespace graphc::strategytest;

namespace {

struct Fused {
  int batchNorms = 0, forward = 0, gradients = 0, reluGrads = 0;
};

Fused countFused(const Module &m) {
  Fused f;
  for (const Node *n : m.findGraph("main")->nodes()) {
    if (n->op() == Op::BatchNormTrain) {
      ++f.batchNorms;
      f.forward += n->attrs().getString("activation") == "relu";
    }
    f.gradients += n->op() == Op::BatchNormTrainGrad && n->numOperands() == 6;
    // ReluGrads masking by a batch norm's (fused) result.
    f.reluGrads += n->op() == Op::ReluGrad && n->operand(0)->producer()->op() == Op::BatchNormTrain;
  }
  return f;
}

std::unique_ptr<Module> inception() {
  models::ModelOptions mo;
  mo.imageSize = 75;
  auto m = models::buildModel("inception_v3", mo);
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return m ? std::move(*m) : nullptr;
}

TEST(FuseBatchNormReluPlan, InceptionOnGpusFusesEveryBatchNormInEachPrecision) {
  auto forward = inception();
  ASSERT_TRUE(forward);
  PlacementRequest place;
  place.gpus = 2;
  for (Precision p : {Precision::FP32, Precision::FP16, Precision::BF16}) {
    SCOPED_TRACE(modeName(p).str());
    CompileRequest req = request(16);
    req.options.precision = p;
    auto plan = compilePlan(*forward, req, place);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    Fused f = countFused(**plan);
    // inception_v3 has 94 batch norms, each before a ReLU; two towers.
    EXPECT_EQ(f.batchNorms, 2 * 94);
    EXPECT_EQ(f.forward, f.batchNorms);
    EXPECT_EQ(f.gradients, f.batchNorms);
    EXPECT_EQ(f.reluGrads, 0);
  }
}

TEST(FuseBatchNormReluPlan, ModelParallelOnGpusFusesTheGradients) {
  auto forward = model("small_cnn");
  PlacementRequest place;
  place.gpus = 2;
  place.strategy = Strategy::ModelParallel;
  auto plan = compilePlan(*forward, request(16), place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  Fused f = countFused(**plan);
  EXPECT_GT(f.batchNorms, 0);
  EXPECT_EQ(f.gradients, f.batchNorms);
}

TEST(FuseBatchNormReluPlan, TheHostsPlanKeepsItsReluGrads) {
  auto forward = model("small_cnn");
  PlacementRequest host; // no devices: the host's plan
  auto plan = compilePlan(*forward, request(16), host);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  Fused f = countFused(**plan);
  EXPECT_GT(f.batchNorms, 0);
  EXPECT_EQ(f.forward, f.batchNorms);
  EXPECT_EQ(f.gradients, 0);
  EXPECT_EQ(f.reluGrads, f.batchNorms);
}

} // namespace
