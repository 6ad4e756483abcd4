//===- BatchNormReluFusionTest.cpp - fuse-bn-relu in training graphs ------===//
//
// The training pipeline's fuse-bn-relu (passes/InferenceFusion.h): after
// autodiff, a BatchNormTrain read only by a Relu computes the ReLU itself.
// What fuses (and what must not), and that training with it gives the same
// bits as without, in f32 and, where the CPU has bf16 instructions, in bf16.
//
//===----------------------------------------------------------------------===//

#include "ir/Builder.h"
#include "kernels/cpu/CpuBackend.h"
#include "passes/FuseBatchNormRelu.h"
#include "tests/towers/TowerTestUtil.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

const char *const kFusedSingleDevice = "bind-batch,training-mode,add-loss,mixed-precision,autodiff,"
                                       "add-optimizer,fuse-bn-relu,dce,verify";

TEST(BatchNormReluFusion, EveryBatchNormBeforeAReluFusesAndTheGradientReadsItsResult) {
  auto m = buildOrFail("small_cnn", {});
  ASSERT_TRUE(m);
  CompileOptions o;
  o.batch = 8;
  ASSERT_FALSE(bool(runPipeline(*m, kFusedSingleDevice, o)));
  int fused = 0, unfused = 0, fromBatchNorm = 0;
  for (const Node *n : m->main().nodes()) {
    fused += n->op() == Op::BatchNormTrain && n->attrs().getString("activation") == "relu";
    // No Relu of a batch norm is left (the classifier's, after a Gemm, is).
    unfused += n->op() == Op::Relu && n->operand(0)->producer()->op() == Op::BatchNormTrain;
    // The gradient's mask is the fused node's result: the ReLU's output.
    fromBatchNorm +=
        n->op() == Op::ReluGrad && n->operand(0)->producer()->op() == Op::BatchNormTrain;
  }
  EXPECT_GT(fused, 0);
  EXPECT_EQ(unfused, 0);
  EXPECT_EQ(fromBatchNorm, fused);
}

TEST(BatchNormReluFusion, ABatchNormReadElsewhereOrAnOutputKeepsItsRelu) {
  for (bool output : {false, true}) {
    Module m("bn_relu");
    Builder b(m.main());
    TensorType x(DType::F32, {4, 3, 5, 5}), c(DType::F32, {3});
    Node *bn = b.createNode(Op::BatchNormTrain, {b.input("x", x), b.input("s", c), b.input("b", c)},
                            {}, "bn");
    Value *y = b.create(Op::Relu, {bn->result(0)});
    m.main().addOutput(y);
    if (output)
      m.main().addOutput(bn->result(0));
    else
      m.main().addOutput(b.create(Op::Add, {bn->result(0), y}));
    EXPECT_EQ(fuseBatchNormRelu(m), 0u) << (output ? "an output" : "two readers");
    EXPECT_FALSE(bn->attrs().has("activation"));
  }
}

TEST(BatchNormReluFusion, TrainsToTheSameBitsAsWithout) {
  // small_cnn (BatchNorm then ReLU throughout) and resnet18 (whose second
  // batch norm in a block feeds the residual Add, which keeps its ReLU).
  std::vector<Precision> precisions{Precision::FP32};
  if (cpuHasBf16())
    precisions.push_back(Precision::BF16);
  for (const char *model : {"small_cnn", "resnet18"})
    for (Precision p : precisions) {
      models::ModelOptions mo;
      if (llvm::StringRef(model) == "resnet18")
        mo.imageSize = 32;
      else
        mo.dropout = 0;
      std::string what = std::string(model) + (p == Precision::BF16 ? " bf16" : " fp32");
      SingleDeviceRun fused = trainSingleDevice(model, mo, 8, 3, 0.05f, p, kFusedSingleDevice);
      SingleDeviceRun plain = trainSingleDevice(model, mo, 8, 3, 0.05f, p);
      ASSERT_FALSE(plain.variables.empty()) << what;
      EXPECT_EQ(fused.loss, plain.loss) << what;
      expectSameBits(fused.variables, plain.variables, what);
    }
}

} // namespace
