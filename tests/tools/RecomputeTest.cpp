//===- RecomputeTest.cpp - --recompute auto under a memory limit ----------===//
//
// The compiler as `graphc place` and `graphrun train --emulate` run it, on
// cluster files whose one GPU has too little memory for the plan: without
// recomputation the plan does not fit (the placement's refusal), with
// `--recompute auto` it does, its memory plan's peak lower, and trained a
// few steps on the emulated GPU it gives the same bits as the plan that
// keeps every activation. On a GPU with room the pass changes nothing.
//
//===----------------------------------------------------------------------===//

#include "passes/Recompute.h"
#include "ClusterFile.h"
#include "ExecutorVariables.h"
#include "SumBound.h"
#include "executor/Executor.h"
#include "frontend/models/Models.h"
#include "ir/Printer.h"
#include "ir/Random.h"
#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/CompiledModule.h"
#include "placement/analysis/MemoryNeeds.h"
#include "tools/driver/Emulation.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <map>

using namespace graphc;
using graphc::testcluster::ClusterFile;

namespace {

std::unique_ptr<Module> compileOn(const Module &forward, int64_t batch, const std::string &cluster,
                                  RecomputeMode mode) {
  CompileRequest req;
  req.options.batch = batch;
  req.options.recompute.mode = mode;
  PlacementRequest place;
  place.clusterFile = cluster;
  auto plan = compilePlan(forward, req, place);
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return nullptr;
  }
  return std::move(*plan);
}

/// gpu:0's need and capacity in `plan`.
MemoryNeed gpuNeed(const Module &plan) {
  auto needs = memoryNeeds(*runnablePart(plan));
  if (!needs) {
    ADD_FAILURE() << llvm::toString(needs.takeError());
    return {};
  }
  for (const MemoryNeed &n : *needs)
    if (n.device == "gpu:0")
      return n;
  ADD_FAILURE() << "no gpu:0 in the plan";
  return {};
}

unsigned copiesIn(const Module &plan) {
  return (unsigned)llvm::count_if(plan.findGraph("main")->nodes(),
                                  [](const Node *n) { return isRecomputed(*n); });
}

std::string text(const Module &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  print(m, os);
  return s;
}

struct Trained {
  std::map<std::string, Tensor> variables;
  double loss = 0;
};

/// `steps` steps of momentum SGD on one random batch, the GPU emulated as
/// `graphrun train --emulate` does.
Trained trainEmulated(const Module &plan, int steps) {
  Trained t;
  ExecutorOptions eo;
  eo.threads = 2;
  eo.seed = 7;
  emulateDevices(plan, eo);
  auto ex = Executor::create(plan, std::move(eo));
  if (!ex) {
    ADD_FAILURE() << llvm::toString(ex.takeError());
    return t;
  }
  const TensorType xt = plan.findGraph("main")->findInput("input")->result()->type();
  Tensor x(xt), labels(TensorType(DType::I64, {xt.shape[0]}));
  RandomStream r(42, 1);
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.set(i, r.uniform() * 2 - 1);
  for (int64_t i = 0; i < xt.shape[0]; ++i)
    labels.set(i, (double)(r.next() % 10));
  llvm::StringMap<Tensor> feeds;
  feeds["input"] = x;
  feeds["labels"] = labels;
  feeds["lr"] = Tensor::scalar(0.05f);
  for (int s = 0; s < steps; ++s) {
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

/// The whole case for one model: a GPU with room, then one with 95% of what
/// the plan needs. (At these sizes the GPU's arena is mostly the weights'
/// copies from the host and the weight gradients, which live the whole step;
/// the activations recomputation can drop are a part of the rest.)
void checkModel(llvm::StringRef model, models::ModelOptions mo, int64_t batch, int steps) {
  SCOPED_TRACE(model.str());
  auto forward = models::buildModel(model, mo);
  ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
  ClusterFile roomy(1, 16LL << 30, 1e10);
  auto keeps = compileOn(**forward, batch, roomy.path, RecomputeMode::Off);
  ASSERT_TRUE(keeps);
  // With room, --recompute auto changes nothing.
  auto untouched = compileOn(**forward, batch, roomy.path, RecomputeMode::Auto);
  ASSERT_TRUE(untouched);
  EXPECT_EQ(text(*untouched), text(*keeps));

  MemoryNeed full = gpuNeed(*keeps);
  ASSERT_GT(full.activations, 0);
  ClusterFile tight(1, full.total() * 95 / 100, 1e10);
  auto refused = compileOn(**forward, batch, tight.path, RecomputeMode::Off);
  ASSERT_TRUE(refused);
  EXPECT_EQ(copiesIn(*refused), 0u);
  llvm::Error unfit = checkPlanFitsCluster(*refused);
  EXPECT_TRUE(bool(unfit)) << "the plan was to need more than the GPU has";
  llvm::consumeError(std::move(unfit));

  auto recomputed = compileOn(**forward, batch, tight.path, RecomputeMode::Auto);
  ASSERT_TRUE(recomputed);
  EXPECT_GT(copiesIn(*recomputed), 0u);
  EXPECT_FALSE(bool(checkPlanFitsCluster(*recomputed)));
  MemoryNeed less = gpuNeed(*recomputed);
  EXPECT_LT(less.activations, full.activations);
  EXPECT_LE(less.total(), less.capacity);
  std::printf("[ recompute] %s: gpu:0 activations %.1f -> %.1f MiB (%u copies)\n",
              model.str().c_str(), full.activations / 1048576.0, less.activations / 1048576.0,
              copiesIn(*recomputed));

  Trained want = trainEmulated(*keeps, steps), got = trainEmulated(*recomputed, steps);
  ASSERT_FALSE(want.variables.empty());
  EXPECT_EQ(got.loss, want.loss);
  ASSERT_EQ(got.variables.size(), want.variables.size());
  for (const auto &[name, value] : want.variables) {
    auto it = got.variables.find(name);
    ASSERT_NE(it, got.variables.end()) << name;
    EXPECT_TRUE(sumbound::sameBits(it->second, value)) << name;
  }
}

TEST(RecomputeAuto, SmallCnnFitsAGpuTooSmallForItAndTrainsToTheSameBits) {
  models::ModelOptions mo;
  mo.dropout = 0.5;
  checkModel("small_cnn", mo, 32, 3);
}

TEST(RecomputeAuto, InceptionFitsAGpuTooSmallForItAndTrainsToTheSameBits) {
  models::ModelOptions mo;
  mo.imageSize = 75;
  mo.numClasses = 10;
  checkModel("inception_v3", mo, 4, 2);
}

TEST(RecomputeAuto, TheModeParsesAndNamesItself) {
  for (RecomputeMode m : {RecomputeMode::Off, RecomputeMode::Auto}) {
    auto parsed = parseRecomputeMode(modeName(m));
    ASSERT_TRUE(bool(parsed));
    EXPECT_EQ(*parsed, m);
  }
  auto bad = parseRecomputeMode("always");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("--recompute always"), std::string::npos);
}

} // namespace
