//===- AddLossTest.cpp - add-loss: structure and errors ---------------------===//

#include "PassTestUtil.h"

#include "ir/Verifier.h"
#include "passes/AddLoss.h"

#include <gtest/gtest.h>

using namespace graphc;
using passtest::addVariable;

namespace {

/// x [batch, 6] -> Gemm -> logits [batch, 3] (and aux logits [batch, 2]).
std::unique_ptr<Module> heads(int64_t batch, bool aux) {
  auto m = std::make_unique<Module>("heads");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {batch, 6}));
  Attrs t;
  t.set("transB", int64_t(1));
  m->main().addOutput(b.create(Op::Gemm, {x, addVariable(b, "fc.weight", {3, 6})}, t, "fc"));
  if (aux)
    m->main().addOutput(b.create(Op::Gemm, {x, addVariable(b, "aux.weight", {2, 6})}, t, "aux"));
  if (batch != kBatchDim)
    m->plan().batch = batch;
  return m;
}

std::string errorOf(Module &m, const CompileOptions &o = {}) {
  auto r = addLoss(m, lossOptions(o));
  return r ? "no error" : llvm::toString(r.takeError());
}

TEST(AddLoss, MeanCrossEntropyOverTheBoundBatch) {
  auto m = heads(8, false);
  auto r = addLoss(*m, {});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  ASSERT_FALSE(bool(verify(*m)));
  Graph &g = m->main();
  Node *labels = g.findInput("labels");
  ASSERT_TRUE(labels);
  EXPECT_EQ(labels->result()->type(), TensorType(DType::I64, {8}));
  Node *loss = g.findNode("loss/cross_entropy");
  ASSERT_TRUE(loss);
  EXPECT_EQ(loss->op(), Op::SoftmaxCrossEntropy);
  EXPECT_EQ(loss->operand(0)->name(), "fc");
  EXPECT_EQ(loss->operand(1), labels->result());
  EXPECT_DOUBLE_EQ(loss->attrs().getFloat("scale"), 1.0 / 8);
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[0], loss->result());
  EXPECT_EQ(g.outputs()[1]->name(), "fc");
}

TEST(AddLoss, AuxiliaryHeadAddsItsWeightedLoss) {
  auto m = heads(4, true);
  CompileOptions o;
  o.auxLossWeight = 0.4;
  ASSERT_TRUE(bool(addLoss(*m, lossOptions(o))));
  ASSERT_FALSE(bool(verify(*m)));
  Graph &g = m->main();
  Node *aux = g.findNode("loss/aux_cross_entropy");
  Node *total = g.findNode("loss/total");
  ASSERT_TRUE(aux && total);
  EXPECT_EQ(aux->operand(0)->name(), "aux");
  EXPECT_DOUBLE_EQ(aux->attrs().getFloat("scale"), 0.4 / 4);
  EXPECT_EQ(total->op(), Op::Add);
  EXPECT_EQ(total->operand(0)->name(), "loss/cross_entropy");
  EXPECT_EQ(total->operand(1), aux->result());
  ASSERT_EQ(g.outputs().size(), 3u);
  EXPECT_EQ(g.outputs()[0], total->result());
  EXPECT_EQ(g.outputs()[1]->name(), "fc");
  EXPECT_EQ(g.outputs()[2]->name(), "aux");
}

TEST(AddLoss, NllReadsTheOutputAndMseItsTargets) {
  {
    auto m = heads(8, false);
    CompileOptions o;
    o.loss = LossKind::Nll;
    ASSERT_TRUE(bool(addLoss(*m, lossOptions(o))));
    ASSERT_FALSE(bool(verify(*m)));
    Node *loss = m->main().findNode("loss/nll");
    ASSERT_TRUE(loss);
    EXPECT_EQ(loss->attrs().getString("loss"), "nll");
    EXPECT_DOUBLE_EQ(loss->attrs().getFloat("scale"), 1.0 / 8);
    EXPECT_EQ(m->main().findInput("labels")->result()->type(), TensorType(DType::I64, {8}));
    EXPECT_EQ(m->plan().loss, LossKind::Nll);
  }
  {
    auto m = heads(8, false);
    CompileOptions o;
    o.loss = LossKind::Mse;
    ASSERT_TRUE(bool(addLoss(*m, lossOptions(o))));
    ASSERT_FALSE(bool(verify(*m)));
    Node *loss = m->main().findNode("loss/mse");
    ASSERT_TRUE(loss);
    EXPECT_EQ(loss->operand(0)->name(), "fc");
    // The mean over every element of the global batch's output.
    EXPECT_DOUBLE_EQ(loss->attrs().getFloat("scale"), 1.0 / (8 * 3));
    EXPECT_EQ(m->main().findInput("labels")->result()->type(), TensorType(DType::F32, {8, 3}));
    EXPECT_EQ(m->plan().loss, LossKind::Mse);
  }
  auto aux = heads(4, true);
  CompileOptions o;
  o.loss = LossKind::Mse;
  EXPECT_NE(errorOf(*aux, o).find("--loss mse takes one output"), std::string::npos);
  auto ce = heads(4, false);
  ASSERT_TRUE(bool(addLoss(*ce, {})));
  EXPECT_FALSE(ce->plan().loss) << "cross-entropy, the default, is not recorded";
}

TEST(AddLoss, ReusesALabelsInputOfTheRightType) {
  auto m = heads(4, false);
  Builder(m->main()).input("labels", TensorType(DType::I64, {4}));
  ASSERT_TRUE(bool(addLoss(*m, {})));
  EXPECT_EQ(m->main().inputs().size(), 2u);

  auto wrong = heads(4, false);
  Builder(wrong->main()).input("labels", TensorType(DType::I32, {4}));
  EXPECT_NE(errorOf(*wrong).find("'labels'"), std::string::npos);
}

TEST(AddLoss, UnboundBatchIsAnError) {
  auto m = heads(kBatchDim, false);
  std::string msg = errorOf(*m);
  EXPECT_NE(msg.find("batch is not bound"), std::string::npos) << msg;
}

TEST(AddLoss, FirstOutputMustBeRank2Logits) {
  auto m = std::make_unique<Module>("rank3");
  Builder b(m->main());
  m->main().addOutput(b.input("x", TensorType(DType::F32, {4, 3, 2})));
  m->plan().batch = int64_t(4);
  std::string msg = errorOf(*m);
  EXPECT_NE(msg.find("output 0 'x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32[4,3,2]"), std::string::npos) << msg;

  auto ints = std::make_unique<Module>("ints");
  Builder bi(ints->main());
  ints->main().addOutput(bi.input("x", TensorType(DType::I64, {4, 3})));
  ints->plan().batch = int64_t(4);
  EXPECT_NE(errorOf(*ints).find("floating-point logits"), std::string::npos);
}

TEST(AddLoss, MoreThanTwoOutputsIsAnError) {
  auto m = heads(4, true);
  m->main().addOutput(m->main().outputs()[0]);
  EXPECT_NE(errorOf(*m).find("has 3 outputs"), std::string::npos);
}

} // namespace
