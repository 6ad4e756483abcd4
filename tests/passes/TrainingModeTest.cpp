//===- TrainingModeTest.cpp - training-mode: structure and errors -----------===//

#include "PassTestUtil.h"

#include "ir/Verifier.h"
#include "passes/TrainingMode.h"

#include <gtest/gtest.h>

using namespace graphc;
using passtest::addVariable;

namespace {

/// x [batch, 4, 3, 3] -> BatchNorm {training} -> Dropout -> Dropout.
std::unique_ptr<Module> bnDropoutModel(int64_t batch, int64_t training) {
  auto m = std::make_unique<Module>("bn_dropout");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {batch, 4, 3, 3}));
  Value *scale = addVariable(b, "bn.weight", {4}, VarKind::Param, {"ones", {}});
  Value *bias = addVariable(b, "bn.bias", {4});
  Value *mean = addVariable(b, "bn.running_mean", {4}, VarKind::State);
  Value *var = addVariable(b, "bn.running_var", {4}, VarKind::State, {"ones", {}});
  Attrs a;
  a.set("epsilon", 1e-5);
  a.set("momentum", 0.75);
  a.set("training", training);
  Node *bn = b.createNode(Op::BatchNorm, {x, scale, bias, mean, var}, a, "block/bn");
  bn->setRequestedDevice(DeviceId::gpu(1));
  bn->setTower(0);
  Attrs d;
  d.set("ratio", 0.25);
  Value *y = b.create(Op::Dropout, {bn->result()}, d, "block/drop1");
  y = b.create(Op::Dropout, {y}, d, "block/drop2");
  m->main().addOutput(y);
  if (batch != kBatchDim)
    m->plan().batch = batch;
  return m;
}

double constantValue(const Graph &g, llvm::StringRef name) {
  const Node *n = g.findNode(name);
  EXPECT_TRUE(n && n->op() == Op::Constant) << name.str();
  return n ? n->attrs().getTensor("value")->at(0) : 0;
}

TEST(TrainingMode, BatchNormBecomesBatchNormTrainWithMovingAverages) {
  auto m = bnDropoutModel(2, 1);
  auto changed = applyTrainingMode(*m, {});
  ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  EXPECT_TRUE(*changed);
  ASSERT_FALSE(bool(verify(*m)));
  Graph &g = m->main();

  Node *bn = g.findNode("block/bn");
  ASSERT_TRUE(bn);
  EXPECT_EQ(bn->op(), Op::BatchNormTrain);
  ASSERT_EQ(bn->numOperands(), 3u);
  EXPECT_EQ(bn->operand(0)->name(), "x");
  EXPECT_EQ(bn->operand(1)->name(), "bn.weight");
  EXPECT_EQ(bn->operand(2)->name(), "bn.bias");
  EXPECT_EQ(bn->result(0)->name(), "block/bn:0");
  EXPECT_FALSE(bn->attrs().has("training"));
  EXPECT_EQ(bn->attrs().getFloat("epsilon"), 1e-5);
  EXPECT_EQ(bn->requestedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(bn->tower(), 0);
  EXPECT_EQ(g.findNode("block/drop1")->operand(0), bn->result(0));
  for (Node *n : g.nodes())
    EXPECT_NE(n->op(), Op::BatchNorm) << n->name();

  // Moving averages: ONNX momentum, unbiased variance with n = 2·3·3 = 18.
  Node *updateMean = g.findNode("block/bn/update_mean");
  Node *updateVar = g.findNode("block/bn/update_var");
  ASSERT_TRUE(updateMean && updateVar);
  EXPECT_EQ(updateMean->op(), Op::Assign);
  EXPECT_EQ(updateMean->attrs().getString("var"), "bn.running_mean");
  EXPECT_EQ(updateVar->attrs().getString("var"), "bn.running_var");
  EXPECT_EQ(updateMean->requestedDevice(), DeviceId::gpu(1));
  EXPECT_FLOAT_EQ(constantValue(g, "block/bn/momentum"), 0.75);
  EXPECT_FLOAT_EQ(constantValue(g, "block/bn/mean_weight"), 0.25);
  EXPECT_FLOAT_EQ(constantValue(g, "block/bn/var_weight"), 0.25 * 18.0 / 17.0);
  // next = running·momentum + batch_stat·weight.
  Node *next = updateVar->operand(0)->producer();
  ASSERT_EQ(next->op(), Op::Add);
  Node *decayed = next->operand(0)->producer(), *fresh = next->operand(1)->producer();
  EXPECT_EQ(decayed->operand(0)->name(), "bn.running_var");
  EXPECT_EQ(fresh->operand(0), bn->result(2));
  EXPECT_EQ(fresh->operand(1)->name(), "block/bn/var_weight");
  EXPECT_EQ(updateMean->operand(0)->producer()->operand(1)->producer()->operand(0), bn->result(1));
  EXPECT_EQ(m->plan().training, true);
}

TEST(TrainingMode, DropoutBecomesDropoutTrainWithDistinctSeeds) {
  auto m = bnDropoutModel(2, 0);
  ASSERT_TRUE(bool(applyTrainingMode(*m, {})));
  ASSERT_FALSE(bool(verify(*m)));
  Graph &g = m->main();
  Node *d1 = g.findNode("block/drop1"), *d2 = g.findNode("block/drop2");
  ASSERT_TRUE(d1 && d2);
  EXPECT_EQ(d1->op(), Op::DropoutTrain);
  EXPECT_EQ(d1->numResults(), 2u);
  EXPECT_EQ(d1->attrs().getFloat("ratio"), 0.25);
  EXPECT_EQ(d2->operand(0), d1->result(0));
  EXPECT_EQ(g.outputs()[0], d2->result(0));
  ASSERT_TRUE(d1->attrs().has("seed") && d2->attrs().has("seed"));
  EXPECT_NE(d1->attrs().getInt("seed"), d2->attrs().getInt("seed"));

  // Same name and salt: same seed; another salt: another seed.
  auto again = bnDropoutModel(2, 0);
  ASSERT_TRUE(bool(applyTrainingMode(*again, {})));
  EXPECT_EQ(again->main().findNode("block/drop1")->attrs().getInt("seed"),
            d1->attrs().getInt("seed"));
  auto salted = bnDropoutModel(2, 0);
  CompileOptions o;
  o.dropoutSeedSalt = 3;
  ASSERT_TRUE(bool(applyTrainingMode(*salted, trainingModeOptions(o))));
  EXPECT_NE(salted->main().findNode("block/drop1")->attrs().getInt("seed"),
            d1->attrs().getInt("seed"));
}

TEST(TrainingMode, InferenceAndFrozenBatchNormStay) {
  auto inference = bnDropoutModel(2, 0);
  ASSERT_TRUE(bool(applyTrainingMode(*inference, {})));
  EXPECT_EQ(inference->main().findNode("block/bn")->op(), Op::BatchNorm);

  auto frozen = bnDropoutModel(2, 1);
  CompileOptions o;
  o.bn = cantFail(parseBnMode("frozen"));
  ASSERT_TRUE(bool(applyTrainingMode(*frozen, trainingModeOptions(o))));
  ASSERT_FALSE(bool(verify(*frozen)));
  Graph &g = frozen->main();
  EXPECT_EQ(g.findNode("block/bn")->op(), Op::BatchNorm);
  for (Node *n : g.nodes())
    EXPECT_NE(n->op(), Op::Assign) << n->name();
  EXPECT_EQ(g.findNode("block/drop1")->op(), Op::DropoutTrain);
  EXPECT_EQ(frozen->plan().training, true);
}

TEST(TrainingMode, SecondRunChangesNothing) {
  auto m = bnDropoutModel(2, 1);
  ASSERT_TRUE(bool(applyTrainingMode(*m, {})));
  auto changed = applyTrainingMode(*m, {});
  ASSERT_TRUE(bool(changed));
  EXPECT_FALSE(*changed);
}

TEST(TrainingMode, UnboundBatchIsAnErrorNamingTheNode) {
  auto m = bnDropoutModel(kBatchDim, 1);
  auto r = applyTrainingMode(*m, {});
  ASSERT_FALSE(bool(r));
  std::string msg = llvm::toString(r.takeError());
  EXPECT_NE(msg.find("block/bn"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bound batch"), std::string::npos) << msg;
}

TEST(TrainingMode, RunningStatisticsMustBeVariables) {
  auto m = std::make_unique<Module>("computed_stats");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 3}));
  Value *stat = b.input("stat", TensorType(DType::F32, {3}));
  Value *one = addVariable(b, "s", {3}, VarKind::Param, {"ones", {}});
  Attrs a;
  a.set("training", int64_t(1));
  m->main().addOutput(b.create(Op::BatchNorm, {x, one, one, stat, stat}, a, "bn"));
  auto r = applyTrainingMode(*m, {});
  ASSERT_FALSE(bool(r));
  std::string msg = llvm::toString(r.takeError());
  EXPECT_NE(msg.find("node 'bn' (BatchNorm)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Variable"), std::string::npos) << msg;
}

} // namespace
