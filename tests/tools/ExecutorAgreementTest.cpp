// The executor (schedule, arena plan with in-place reuse and views, kernels
// bound once) must compute exactly what the obvious node-by-node evaluator
// computes, step after step, on real training graphs. With blocked layouts the
// oneDNN layers sum in another order, so there the bar is closeness, not
// identity.

#include "executor/Executor.h"
#include "frontend/models/Models.h"
#include "ir/Random.h"
#include "kernels/KernelRunner.h"
#include "tools/driver/Compile.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace graphc;

namespace {

Tensor randomTensor(const TensorType &t, uint64_t seed, bool labels, int64_t classes) {
  Tensor x(t);
  RandomStream rng(seed, 1);
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.set(i, labels ? (double)(rng.next() % classes) : rng.normal());
  return x;
}

/// Equal, or (blocked layouts) within 1e-4 relative with a small absolute floor.
::testing::AssertionResult close(double got, double want, bool exact) {
  if (exact ? got == want : std::abs(got - want) <= 1e-4 * std::abs(want) + 1e-6)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " vs " << want;
}

void agree(const char *model, int64_t batch, const char *optimizer, bool blocked) {
  models::ModelOptions mo;
  auto forward = models::buildModel(model, mo);
  ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
  CompileRequest req;
  req.options.batch = batch;
  req.options.optimizer = optimizer;
  req.options.learningRate = 0.05;
  auto m = compileTraining(**forward, req);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ExecutorOptions eo;
  eo.seed = 3;
  eo.blockedLayouts = blocked;
  auto ex = Executor::create(**m, eo);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  TensorVariables ref;
  for (const std::string &name : (*ex)->variableNames())
    ref.tensors[name] = *(*ex)->readVariable(name);
  for (uint64_t step = 0; step < 3; ++step) {
    llvm::StringMap<Tensor> feeds;
    for (Node *in : (*m)->main().inputs()) {
      const TensorType &t = in->result()->type();
      if (in->name() == "lr")
        feeds["lr"] = Tensor::scalar(0.05f);
      else
        feeds[in->name()] = randomTensor(t, step * 7 + 1, in->name() == "labels", 10);
    }
    auto got = (*ex)->run(feeds);
    ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
    auto want = runGraph((*m)->main(), feeds, ref, step, 3);
    ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
    for (size_t o = 0; o < got->size(); ++o)
      for (int64_t i = 0; i < (*got)[o].numElements(); ++i)
        ASSERT_TRUE(close((*got)[o].at(i), (*want)[o].at(i), !blocked))
            << model << " step " << step << " output " << o << " element " << i;
    for (auto &entry : ref.tensors) {
      Tensor mine = *(*ex)->readVariable(entry.getKey());
      for (int64_t i = 0; i < mine.numElements(); ++i)
        ASSERT_TRUE(close(mine.at(i), entry.getValue().at(i), !blocked))
            << model << " step " << step << " variable " << entry.getKey().str();
    }
  }
}

} // namespace

TEST(ExecutorAgreement, MlpMomentum) { agree("mlp", 8, "momentum", false); }
TEST(ExecutorAgreement, SmallCnnWithBatchNormAdam) { agree("small_cnn", 6, "adam", false); }
TEST(ExecutorAgreement, SmallCnnNoBnRmsprop) { agree("small_cnn_nobn", 5, "rmsprop", false); }
TEST(ExecutorAgreement, SmallCnnBlockedLayouts) { agree("small_cnn", 16, "momentum", true); }
