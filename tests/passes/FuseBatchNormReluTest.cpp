//===- FuseBatchNormReluTest.cpp - fuse-bn-relu, both halves ---------------===//
//
// The pass on hand-built training graphs (passes/FuseBatchNormRelu.h): what
// fuses, what is left alone, that a second run changes nothing, that only
// BatchNormReluOptions::gradients fuses the gradient, and what the verifier
// accepts of the fused gradient. Training with it is tests/towers'
// BatchNormReluFusionTest; its kernel, tests/kernels/dnnl.
//
//===----------------------------------------------------------------------===//

#include "PassTestUtil.h"

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/FuseBatchNormRelu.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

/// x -> BatchNormTrain "bn" -> Relu "relu" (output), and the backward of the
/// pair: ReluGrad "relu_grad"(relu, dy) -> BatchNormTrainGrad "bn_grad"
/// (outputs dx, dscale, dbias).
struct BnRelu {
  std::unique_ptr<Module> m = std::make_unique<Module>("bn_relu");
  Value *x, *scale, *dy, *relu;
  Node *bn, *reluGrad, *grad;

  BnRelu() {
    Builder b(m->main());
    TensorType data(DType::F32, {4, 3, 5, 5}), channels(DType::F32, {3});
    x = b.input("x", data);
    scale = b.input("scale", channels);
    dy = b.input("dy", data);
    bn = b.createNode(Op::BatchNormTrain, {x, scale, b.input("bias", channels)}, {}, "bn");
    relu = b.create(Op::Relu, {bn->result(0)}, {}, "relu");
    reluGrad = b.createNode(Op::ReluGrad, {relu, dy}, {}, "relu_grad");
    grad =
        b.createNode(Op::BatchNormTrainGrad,
                     {x, scale, bn->result(1), bn->result(2), reluGrad->result()}, {}, "bn_grad");
    grad->setTower(1);
    grad->setRequestedDevice(DeviceId::gpu(1));
    m->main().addOutput(relu);
    for (unsigned i = 0; i < 3; ++i)
      m->main().addOutput(grad->result(i));
  }

  unsigned count(Op op) const {
    unsigned n = 0;
    for (const Node *node : m->main().nodes())
      n += node->op() == op;
    return n;
  }
};

std::string errorOf(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "";
}

/// The pass with the gradient half; whether it changed anything.
bool fuseBoth(Module &m) {
  auto changed = fuseBatchNormReluPass(m, {true});
  if (!changed) {
    ADD_FAILURE() << llvm::toString(changed.takeError());
    return false;
  }
  return *changed;
}

TEST(FuseBatchNormRelu, TheGradientTakesTheReluOutputAsItsMask) {
  BnRelu g;
  EXPECT_EQ(fuseBatchNormRelu(*g.m), 1u);
  EXPECT_EQ(fuseBatchNormReluGradients(*g.m), 1u);
  EXPECT_EQ(g.bn->attrs().getString("activation"), "relu");
  EXPECT_EQ(g.bn->name(), "bn");
  ASSERT_EQ(g.grad->numOperands(), 6u);
  EXPECT_EQ(g.grad->operand(4), g.dy);
  EXPECT_EQ(g.grad->operand(5), g.bn->result(0));
  EXPECT_EQ(g.grad->attrs().getString("activation"), "relu");
  EXPECT_EQ(g.grad->name(), "bn_grad");
  EXPECT_EQ(g.grad->tower(), 1);
  EXPECT_EQ(g.grad->requestedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(g.count(Op::Relu), 0u);
  EXPECT_EQ(g.count(Op::ReluGrad), 0u);
  EXPECT_EQ(g.m->main().outputs()[0], g.bn->result(0));
  EXPECT_EQ(errorOf(verify(*g.m)), "");
  // The text form reads back as it was written.
  std::string text = toText(*g.m);
  auto parsed = parseModule(text);
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(toText(**parsed), text);
}

TEST(FuseBatchNormRelu, ASecondRunChangesNothing) {
  BnRelu g;
  ASSERT_TRUE(fuseBoth(*g.m));
  std::string once = toText(*g.m);
  EXPECT_FALSE(fuseBoth(*g.m));
  EXPECT_EQ(toText(*g.m), once);
}

TEST(FuseBatchNormRelu, WithoutTheGradientOptionOnlyTheForwardFuses) {
  BnRelu g;
  CompileOptions o;
  ASSERT_EQ(errorOf(passtest::runPipeline(*g.m, "fuse-bn-relu", o)), "");
  EXPECT_EQ(g.bn->attrs().getString("activation"), "relu");
  EXPECT_EQ(g.grad->numOperands(), 5u);
  EXPECT_EQ(g.count(Op::ReluGrad), 1u);
  // The ReluGrad now masks by the fused batch norm's result.
  EXPECT_EQ(g.reluGrad->operand(0), g.bn->result(0));

  BnRelu h;
  o.fuseBatchNormReluGradients = true;
  ASSERT_EQ(errorOf(passtest::runPipeline(*h.m, "fuse-bn-relu", o)), "");
  EXPECT_EQ(h.grad->numOperands(), 6u);
  EXPECT_EQ(h.count(Op::ReluGrad), 0u);
}

TEST(FuseBatchNormRelu, ABatchNormReadTwiceOrAnOutputKeepsReluAndReluGrad) {
  for (bool output : {false, true}) {
    SCOPED_TRACE(output ? "an output" : "read twice");
    BnRelu g;
    if (output) {
      g.m->main().addOutput(g.bn->result(0));
    } else {
      Builder b(g.m->main());
      g.m->main().addOutput(b.create(Op::Add, {g.bn->result(0), g.relu}));
    }
    EXPECT_EQ(fuseBatchNormRelu(*g.m), 0u);
    EXPECT_EQ(fuseBatchNormReluGradients(*g.m), 0u);
    EXPECT_FALSE(g.bn->attrs().has("activation"));
    EXPECT_EQ(g.grad->numOperands(), 5u);
    EXPECT_EQ(g.count(Op::ReluGrad), 1u);
  }
}

TEST(FuseBatchNormRelu, AReluGradReadElsewhereKeepsItsNode) {
  for (bool output : {false, true}) {
    SCOPED_TRACE(output ? "an output" : "read twice");
    BnRelu g;
    if (output) {
      g.m->main().addOutput(g.reluGrad->result());
    } else {
      Builder b(g.m->main());
      g.m->main().addOutput(b.create(Op::Neg, {g.reluGrad->result()}));
    }
    EXPECT_EQ(fuseBatchNormRelu(*g.m), 1u);
    EXPECT_EQ(fuseBatchNormReluGradients(*g.m), 0u);
    EXPECT_EQ(g.grad->numOperands(), 5u);
    EXPECT_EQ(g.count(Op::ReluGrad), 1u);
    EXPECT_EQ(errorOf(verify(*g.m)), "");
  }
}

TEST(FuseBatchNormRelu, AReluGradFeedingAnotherBatchNormsGradientKeepsItsNode) {
  BnRelu g;
  // The gradient reads another input than the batch norm normalized.
  Builder b(g.m->main());
  g.grad->setOperand(0, b.input("other_x", g.x->type()));
  g.m->main().sortTopologically();
  EXPECT_EQ(fuseBatchNormRelu(*g.m), 1u);
  EXPECT_EQ(fuseBatchNormReluGradients(*g.m), 0u);
  EXPECT_EQ(g.grad->numOperands(), 5u);
}

TEST(FuseBatchNormRelu, TheVerifierTiesTheSixthOperandToTheActivation) {
  {
    BnRelu g;
    ASSERT_TRUE(fuseBoth(*g.m));
    g.grad->attrs().erase("activation");
    EXPECT_NE(errorOf(verify(*g.m)).find("only with activation relu"), std::string::npos)
        << errorOf(verify(*g.m));
  }
  {
    BnRelu g;
    g.grad->attrs().set("activation", std::string("relu"));
    EXPECT_NE(errorOf(verify(*g.m)).find("sixth operand"), std::string::npos)
        << errorOf(verify(*g.m));
  }
  {
    BnRelu g;
    ASSERT_TRUE(fuseBoth(*g.m));
    g.grad->attrs().set("activation", std::string("sigmoid"));
    EXPECT_NE(errorOf(verify(*g.m)).find("is not one a BatchNormTrainGrad fuses"),
              std::string::npos)
        << errorOf(verify(*g.m));
  }
  {
    BnRelu g;
    ASSERT_TRUE(fuseBoth(*g.m));
    Builder b(g.m->main());
    g.grad->setOperand(5, b.input("half", TensorType(DType::F16, {4, 3, 5, 5})));
    g.m->main().sortTopologically();
    EXPECT_NE(errorOf(verify(*g.m)).find("must match input"), std::string::npos)
        << errorOf(verify(*g.m));
  }
}

} // namespace
