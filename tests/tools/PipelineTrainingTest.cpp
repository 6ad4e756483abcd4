//===- PipelineTrainingTest.cpp - --strategy pipeline trained on emulated GPUs -===//
//
// The compiler as `graphc place --strategy pipeline` runs it, trained a few
// steps as `graphrun train --emulate` runs it (plain layouts, every GPU a CPU
// device), against the plans it must equal:
//   - models without batch norm or dropout (small_cnn_nobn --dropout 0, mlp):
//     one device on the whole batch, for 2 and 4 stages and for towers over
//     pipelines (2 pipelines of 2 stages), within 1e-5 of each variable's
//     largest value;
//   - small_cnn (local batch norm, dropout): per-micro-batch statistics and
//     masks, so the reference is M data-parallel towers (the same towers,
//     their sums grouped alike: the same bits with one pipeline);
//   - GPipe and 1F1B issue the same nodes in another order: the same bits;
//   - a pipeline whose stages overflow their GPUs, made to fit by
//     --recompute auto, trains to the bits of the one that keeps every
//     activation (batch norm and dropout recomputed as they were).
//
//===----------------------------------------------------------------------===//

#include "ClusterFile.h"
#include "ExecutorVariables.h"
#include "executor/Executor.h"
#include "frontend/models/Models.h"
#include "ir/Random.h"
#include "passes/AccumulateGradients.h"
#include "passes/PipelineStages.h"
#include "passes/Recompute.h"
#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/CompiledModule.h"
#include "placement/analysis/MemoryNeeds.h"
#include "tools/driver/Emulation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

using namespace graphc;
using graphc::testcluster::ClusterFile;

namespace {

constexpr int kSteps = 3;
constexpr int64_t kBatch = 16;

struct Trained {
  std::map<std::string, Tensor> variables;
  double loss = 0;
};

std::unique_ptr<Module> model(llvm::StringRef name, double dropout) {
  models::ModelOptions mo;
  mo.dropout = dropout;
  auto m = models::buildModel(name, mo);
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  return std::move(*m);
}

/// `graphc place --gpus G [--strategy pipeline --micro-batches M --stages S
/// --pipeline-schedule ...]` of `forward` at `batch`.
std::unique_ptr<Module> place(const Module &forward, int64_t batch, int gpus,
                              unsigned microBatches = 0, std::optional<int> stages = {},
                              PipelineSchedule schedule = PipelineSchedule::OneFOneB) {
  CompileRequest req;
  req.options.batch = batch;
  PlacementRequest p;
  p.gpus = gpus;
  if (microBatches) {
    p.strategy = Strategy::Pipeline;
    p.stages = stages;
    req.options.pipeline.microBatches = microBatches;
    req.options.pipeline.schedule = schedule;
  }
  auto plan = compilePlan(forward, req, p);
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return nullptr;
  }
  return std::move(*plan);
}

/// The first `rows` samples of `t` from sample `from`.
Tensor rowsOf(const Tensor &t, int64_t from, int64_t rows) {
  TensorType type = t.type();
  const int64_t rowBytes = (int64_t)t.bytes() / type.shape[0];
  type.shape[0] = rows;
  Tensor out(type);
  std::memcpy(out.raw(), (const char *)t.raw() + from * rowBytes, (size_t)(rows * rowBytes));
  return out;
}

/// `steps` steps of momentum SGD on one random batch of kBatch samples,
/// the GPUs emulated; a plan that accumulates runs its micro-steps on the
/// batch's consecutive rows (graph "micro", then main).
Trained train(const Module &plan, int steps) {
  Trained t;
  ExecutorOptions eo;
  eo.threads = 2;
  eo.seed = 7;
  eo.blockedLayouts = false;
  emulateDevices(plan, eo);
  if (plan.findGraph(kMicroGraph))
    eo.graphs = {kMicroGraph.str()};
  auto ex = Executor::create(plan, std::move(eo));
  if (!ex) {
    ADD_FAILURE() << llvm::toString(ex.takeError());
    return t;
  }
  const TensorType &planned = plan.findGraph("main")->findInput("input")->result()->type();
  const int64_t micro = planned.shape[0], k = kBatch / micro;
  llvm::SmallVector<int64_t, 4> shape(planned.shape.begin(), planned.shape.end());
  shape[0] = kBatch;
  Tensor x(TensorType(planned.dtype, shape)), labels(TensorType(DType::I64, {kBatch}));
  RandomStream r(42, 1);
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.set(i, r.uniform() * 2 - 1);
  for (int64_t i = 0; i < kBatch; ++i)
    labels.set(i, (double)(r.next() % 10));
  for (int s = 0; s < steps; ++s)
    for (int64_t i = 0; i < k; ++i) {
      llvm::StringMap<Tensor> feeds;
      feeds["input"] = rowsOf(x, i * micro, micro);
      feeds["labels"] = rowsOf(labels, i * micro, micro);
      if (i + 1 < k) {
        if (auto out = (*ex)->run(kMicroGraph, feeds); !out) {
          ADD_FAILURE() << llvm::toString(out.takeError());
          return t;
        }
        continue;
      }
      feeds["lr"] = Tensor::scalar(0.05f);
      auto out = (*ex)->run(feeds);
      if (!out) {
        ADD_FAILURE() << llvm::toString(out.takeError());
        return t;
      }
      t.loss = (*out)[0].at(0);
    }
  t.variables = variables(**ex);
  return t;
}

/// Every variable within `rel` of the largest magnitude of its reference.
void expectClose(const Trained &got, const Trained &want, double rel, const std::string &what) {
  ASSERT_EQ(got.variables.size(), want.variables.size()) << what;
  ASSERT_FALSE(want.variables.empty()) << what;
  for (const auto &[name, w] : want.variables) {
    auto it = got.variables.find(name);
    ASSERT_NE(it, got.variables.end()) << what << ": " << name;
    double largest = 0, worst = 0;
    for (int64_t i = 0; i < w.numElements(); ++i) {
      largest = std::max(largest, std::fabs(w.at(i)));
      worst = std::max(worst, std::fabs(it->second.at(i) - w.at(i)));
    }
    EXPECT_LE(worst, rel * std::max(largest, 1e-6)) << what << ": variable " << name;
  }
  EXPECT_NEAR(got.loss, want.loss, rel * std::max(1.0, std::fabs(want.loss))) << what;
}

void expectSameBits(const Trained &got, const Trained &want, const std::string &what) {
  ASSERT_EQ(got.variables.size(), want.variables.size()) << what;
  for (const auto &[name, w] : want.variables) {
    auto it = got.variables.find(name);
    ASSERT_NE(it, got.variables.end()) << what << ": " << name;
    EXPECT_EQ(std::memcmp(it->second.raw(), w.raw(), w.bytes()), 0) << what << ": " << name;
  }
}

TEST(PipelineTraining, EqualsOneDeviceWithoutBatchNormForTwoAndFourStagesAndTowersOverPipelines) {
  for (llvm::StringRef name : {"small_cnn_nobn", "mlp"}) {
    SCOPED_TRACE(name.str());
    auto forward = model(name, name == "mlp" ? -1 : 0);
    ASSERT_TRUE(forward);
    auto one = place(*forward, kBatch, 1);
    ASSERT_TRUE(one);
    const Trained reference = train(*one, kSteps);
    struct Case {
      int gpus;
      unsigned micro;
      std::optional<int> stages;
      const char *what;
    };
    for (const Case &c : {Case{2, 4, {}, "2 stages x 4 micro-batches"},
                          Case{4, 2, {}, "4 stages x 2 micro-batches"},
                          Case{4, 2, 2, "2 pipelines of 2 stages x 2 micro-batches"}}) {
      auto plan = place(*forward, kBatch, c.gpus, c.micro, c.stages);
      ASSERT_TRUE(plan) << c.what;
      expectClose(train(*plan, kSteps), reference, 1e-5, c.what);
    }
  }
}

TEST(PipelineTraining, LocalBatchNormAndDropoutEqualTheSameMicroBatchesAsDataParallelTowers) {
  auto forward = model("small_cnn", -1);
  ASSERT_TRUE(forward);
  auto towers = place(*forward, kBatch, 4); // 4 towers of 4 samples, the variables on the host
  ASSERT_TRUE(towers);
  const Trained reference = train(*towers, kSteps);
  auto pipeline = place(*forward, kBatch, 2, 4);
  ASSERT_TRUE(pipeline);
  expectSameBits(train(*pipeline, kSteps), reference, "2 stages x 4 micro-batches");
  // Two pipelines add their sums of two micro-batches: grouped otherwise.
  auto both = place(*forward, kBatch, 4, 2, 2);
  ASSERT_TRUE(both);
  expectClose(train(*both, kSteps), reference, 1e-5, "2 pipelines of 2 stages x 2 micro-batches");
}

// With local batch norm the statistics are each micro-batch's, as on one
// device with --accumulate M; the moving averages differ (the pipeline
// updates them once per step, by the micro-batches' mean, accumulation once
// per micro-batch), so only the trainable parameters are compared, and the
// whole batch's statistics on one device are not what a pipeline computes.
TEST(PipelineTraining, LocalBatchNormTrainsAsOneDeviceAccumulatingTheMicroBatches) {
  auto forward = model("small_cnn", 0);
  ASSERT_TRUE(forward);
  CompileRequest req;
  req.options.batch = kBatch / 4;
  req.options.accumulate = 4;
  PlacementRequest one;
  one.gpus = 1;
  auto accumulating = compilePlan(*forward, req, one);
  ASSERT_TRUE(bool(accumulating)) << llvm::toString(accumulating.takeError());
  Trained want = train(**accumulating, kSteps), whole = train(*place(*forward, kBatch, 1), kSteps);
  auto pipeline = place(*forward, kBatch, 2, 4);
  ASSERT_TRUE(pipeline);
  Trained got = train(*pipeline, kSteps);
  for (Trained *t : {&want, &got, &whole})
    for (const char *stat : {"bn1.running_mean", "bn1.running_var", "bn2.running_mean",
                             "bn2.running_var"})
      EXPECT_EQ(t->variables.erase(stat), 1u) << stat;
  expectClose(got, want, 1e-5, "2 stages x 4 micro-batches against --accumulate 4");
  EXPECT_GT(std::fabs(got.loss - whole.loss), 1e-4) << "the whole batch's statistics differ";
}

TEST(PipelineTraining, GpipeAndOneFOneBTrainToTheSameBits) {
  auto forward = model("small_cnn", -1);
  ASSERT_TRUE(forward);
  auto oneF = place(*forward, kBatch, 4, 4, {}, PipelineSchedule::OneFOneB);
  auto gpipe = place(*forward, kBatch, 4, 4, {}, PipelineSchedule::GPipe);
  ASSERT_TRUE(oneF && gpipe);
  expectSameBits(train(*gpipe, kSteps), train(*oneF, kSteps), "gpipe against 1f1b");
}

std::unique_ptr<Module> pipelineOn(const Module &forward, const ClusterFile &cluster,
                                   RecomputeMode recompute) {
  CompileRequest req;
  req.options.batch = kBatch;
  req.options.pipeline.microBatches = 4;
  req.options.recompute.mode = recompute;
  PlacementRequest p;
  p.clusterFile = cluster.path;
  p.strategy = Strategy::Pipeline;
  auto plan = compilePlan(forward, req, p);
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return nullptr;
  }
  return std::move(*plan);
}

// 2 stages x 4 micro-batches, gpu:0 given 80% of what its stage needs with
// room: no cut fits, the recomputed plan does (tests/passes/strategy/
// PipelineStrategyTest.cpp).
TEST(PipelineTraining, RecomputedActivationsTrainToTheSameBits) {
  auto forward = model("small_cnn", -1);
  ASSERT_TRUE(forward);
  ClusterFile roomy(2, 16LL << 30);
  auto keeps = pipelineOn(*forward, roomy, RecomputeMode::Off);
  ASSERT_TRUE(keeps);
  auto needs = memoryNeeds(*runnablePart(*keeps));
  ASSERT_TRUE(bool(needs)) << llvm::toString(needs.takeError());
  auto first = llvm::find_if(*needs, [](const MemoryNeed &n) { return n.device == "gpu:0"; });
  ASSERT_NE(first, needs->end());
  ClusterFile tight(std::vector<int64_t>{first->total() * 8 / 10, 16LL << 30});
  auto recomputed = pipelineOn(*forward, tight, RecomputeMode::Auto);
  ASSERT_TRUE(recomputed);
  EXPECT_FALSE(bool(checkPlanFitsCluster(*recomputed)));
  EXPECT_GT(
      llvm::count_if(recomputed->main().nodes(), [](const Node *n) { return isRecomputed(*n); }),
      0);
  expectSameBits(train(*recomputed, kSteps), train(*keeps, kSteps), "recomputed against kept");
}

} // namespace
