//===- BatchNormReluFusionTest.cpp - fuse-bn-relu in training graphs ------===//
//
// The training pipeline's fuse-bn-relu (passes/FuseBatchNormRelu.h): after
// autodiff, a BatchNormTrain read only by a Relu computes the ReLU itself,
// and in GPU plans its ReluGrad becomes its gradient's mask. What fuses (and
// what must not), and that training with it gives the same bits as without,
// in f32, f16 and, where the CPU has bf16 instructions, bf16; the gradient
// half on two towers of emulated GPUs in every batch-norm mode.
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

/// The default training pipeline up to placement, fuse-bn-relu included.
const char *const kFusedTowers =
    "bind-batch,training-mode,add-loss,mixed-precision,autodiff,add-optimizer,replicate-towers,"
    "split-batch,concat-outputs,aggregate-gradients,loss-scaling,fuse-bn-relu,dce,verify";

struct TowerRun {
  std::map<std::string, Tensor> variables;
  double loss = 0;
  int fusedGradients = 0, batchNormGradients = 0;
};

/// `model` on two towers of emulated GPUs, fuse-bn-relu's gradient half on
/// or off, trained 3 steps on one random batch of 8.
TowerRun trainTwoTowers(llvm::StringRef model, models::ModelOptions mo, Precision p, BnMode bn,
                        bool gradients, bool blockedLayouts = true) {
  TowerRun run;
  auto m = buildOrFail(model, mo);
  if (!m)
    return run;
  CompileOptions o;
  o.batch = 8;
  o.towers = 2;
  o.precision = p;
  o.bn = bn;
  o.fuseBatchNormReluGradients = gradients;
  if (auto e = runPipeline(*m, kFusedTowers, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return run;
  }
  assignRequested(*m);
  if (auto e = runPipeline(*m, "insert-transfers,verify", o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return run;
  }
  for (const Node *n : m->main().nodes())
    if (n->op() == Op::BatchNormTrainGrad) {
      ++run.batchNormGradients;
      run.fusedGradients += n->numOperands() == 6;
    }
  auto ex = makeExecutor(*m, 7, true, blockedLayouts);
  if (!ex)
    return run;
  Batch b = randomBatch(m->main().findInput("input")->result()->type(), 10, 42);
  auto out = train(*ex, b, 3, 0.05f);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return run;
  }
  run.variables = variables(*ex);
  run.loss = (*out)[0].at(0);
  return run;
}

TEST(BatchNormReluFusion, GradientFusionOnEmulatedGpusTrainsToTheSameBits) {
  std::vector<Precision> precisions{Precision::FP32, Precision::FP16};
  if (cpuHasBf16())
    precisions.push_back(Precision::BF16);
  models::ModelOptions cnn;
  cnn.dropout = 0;
  for (Precision p : precisions) {
    std::string what = "small_cnn " + modeName(p).str();
    TowerRun fused = trainTwoTowers("small_cnn", cnn, p, BnMode::Local, true);
    TowerRun plain = trainTwoTowers("small_cnn", cnn, p, BnMode::Local, false);
    ASSERT_FALSE(plain.variables.empty()) << what;
    // Every batch norm of small_cnn is followed by a ReLU, in each tower.
    EXPECT_GT(fused.fusedGradients, 0) << what;
    EXPECT_EQ(fused.fusedGradients, fused.batchNormGradients) << what;
    EXPECT_EQ(plain.fusedGradients, 0) << what;
    EXPECT_EQ(fused.loss, plain.loss) << what;
    expectSameBits(fused.variables, plain.variables, what);
  }
}

TEST(BatchNormReluFusion, InceptionOnEmulatedGpusTrainsToTheSameBits) {
  models::ModelOptions mo;
  mo.imageSize = 75;
  mo.dropout = 0;
  mo.numClasses = 10;
  // Plain layouts: with blocked ones the executor may give the unfused
  // gradient's dy (the ReluGrad's result) another layout than the fused
  // gradient's, and oneDNN's batch-norm gradient sums in the order of its
  // input's layout (below AVX2 they differ; the kernel test holds the mask
  // itself to the bits in every layout).
  TowerRun fused =
      trainTwoTowers("inception_v3", mo, Precision::FP32, BnMode::Local, true, false);
  TowerRun plain =
      trainTwoTowers("inception_v3", mo, Precision::FP32, BnMode::Local, false, false);
  ASSERT_FALSE(plain.variables.empty());
  EXPECT_EQ(fused.fusedGradients, fused.batchNormGradients);
  EXPECT_GT(fused.fusedGradients, 0);
  EXPECT_EQ(fused.loss, plain.loss);
  expectSameBits(fused.variables, plain.variables, "inception_v3");
}

TEST(BatchNormReluFusion, SyncAndFrozenBatchNormsKeepTheirGradients) {
  // --bn sync writes the gradient out of reductions and all-reduces, frozen
  // batch norms have none of their own: nothing for the gradient half, and
  // the plans train as they did.
  models::ModelOptions cnn;
  cnn.dropout = 0;
  for (BnMode bn : {BnMode::Sync, BnMode::Frozen}) {
    std::string what = modeName(bn).str();
    TowerRun fused = trainTwoTowers("small_cnn", cnn, Precision::FP32, bn, true);
    TowerRun plain = trainTwoTowers("small_cnn", cnn, Precision::FP32, bn, false);
    ASSERT_FALSE(plain.variables.empty()) << what;
    EXPECT_EQ(fused.fusedGradients, 0) << what;
    EXPECT_EQ(fused.batchNormGradients, 0) << what;
    EXPECT_EQ(fused.loss, plain.loss) << what;
    expectSameBits(fused.variables, plain.variables, what);
  }
}

} // namespace
