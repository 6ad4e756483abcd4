//===- ModelPipelineTest.cpp - Every built-in model through the training pipeline
//
// Structure only (no evaluation): each model compiles with the default
// training pipeline, every parameter gets exactly one gradient node and one
// update, every trained BatchNorm its two moving-average updates, and
// inception_v3's auxiliary head enters the loss with weight 0.4.
//
//===----------------------------------------------------------------------===//

#include "PassTestUtil.h"

#include "frontend/models/Models.h"

#include "llvm/ADT/StringSet.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

struct Counts {
  size_t params = 0, grads = 0, updates = 0, batchNormTrain = 0, assigns = 0, frozenBn = 0;
};

Counts compile(llvm::StringRef model, const models::ModelOptions &mo, llvm::StringRef options) {
  Counts c;
  auto m = models::buildModel(model, mo);
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return c;
  }
  auto o = passtest::parseOptions(options);
  if (!o) {
    ADD_FAILURE() << llvm::toString(o.takeError());
    return c;
  }
  if (auto e = passtest::runPipeline(**m, "default", *o)) {
    ADD_FAILURE() << model.str() << ": " << llvm::toString(std::move(e));
    return c;
  }
  llvm::StringSet<> graded, updated;
  for (const Variable &v : (*m)->variables())
    c.params += v.trainable();
  for (Node *n : (*m)->main().nodes()) {
    if (n->attrs().has("grad_of")) {
      ++c.grads;
      EXPECT_TRUE(graded.insert(n->attrs().getString("grad_of")).second) << n->name();
    }
    if (n->op() == Op::ApplyMomentum) {
      ++c.updates;
      updated.insert(n->attrs().getString("var"));
    }
    c.batchNormTrain += n->op() == Op::BatchNormTrain;
    c.assigns += n->op() == Op::Assign;
    c.frozenBn += n->op() == Op::BatchNorm;
  }
  for (auto &g : graded)
    EXPECT_TRUE(updated.count(g.getKey())) << g.getKey().str() << " has no update";
  return c;
}

TEST(ModelPipeline, EveryModelTrainsEveryParameter) {
  for (const models::ModelInfo &info : models::listModels()) {
    SCOPED_TRACE(info.name.str());
    models::ModelOptions mo;
    if (info.name == "inception_v3")
      mo.auxLogits = true;
    Counts c = compile(info.name, mo, "batch=2");
    EXPECT_GT(c.params, 0u);
    EXPECT_EQ(c.grads, c.params);
    EXPECT_EQ(c.updates, c.params);
    EXPECT_EQ(c.assigns, 2 * c.batchNormTrain);
    EXPECT_EQ(c.frozenBn, 0u);
  }
}

TEST(ModelPipeline, FrozenBatchNormStillTrainsItsAffine) {
  Counts c = compile("resnet18", {}, "batch=2 bn=frozen");
  EXPECT_EQ(c.batchNormTrain, 0u);
  EXPECT_EQ(c.assigns, 0u);
  EXPECT_GT(c.frozenBn, 0u);
  EXPECT_EQ(c.grads, c.params);
}

TEST(ModelPipeline, InceptionAuxiliaryLossWeight) {
  auto m = models::buildModel("inception_v3", {.auxLogits = true});
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_FALSE(bool(passtest::runPipeline(**m, "default", *passtest::parseOptions("batch=2"))));
  Node *aux = (*m)->main().findNode("tower_0/loss/aux_cross_entropy");
  ASSERT_TRUE(aux);
  EXPECT_DOUBLE_EQ(aux->attrs().getFloat("scale"), 0.4 / 2);
  EXPECT_EQ((*m)->main().outputs()[0]->name(), "loss/total");
}

} // namespace
