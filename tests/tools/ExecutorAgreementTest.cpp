// The executor (schedule, arena plan with in-place reuse and views, kernels
// bound once) must compute exactly what the obvious node-by-node evaluator
// computes, step after step, on real training graphs. With blocked layouts the
// oneDNN layers sum in other orders, so there the bar is closeness, not
// identity, and how close is measured, not assumed: the evaluator runs a
// second time with every input and initial variable moved by one unit in the
// last place, and each tensor of the executor may be no further from the
// evaluator than four times that run is (plus 1e-6 of the tensor's largest
// magnitude). That spread is float32's own on this graph and CPU: through
// batch statistics a gradient that cancels to a small value moves by a percent
// or more, while a wrong reorder or index is off by the values' own size.

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

/// Largest |a - b| over the elements, and largest |b|.
struct Distance {
  double diff = 0, scale = 0;
};
Distance distance(const Tensor &a, const Tensor &b) {
  Distance d;
  for (int64_t i = 0; i < b.numElements(); ++i) {
    d.diff = std::max(d.diff, std::abs(a.at(i) - b.at(i)));
    d.scale = std::max(d.scale, std::abs(b.at(i)));
  }
  return d;
}

/// Every element moved by one unit in the last place, up or down at random.
Tensor nudged(const Tensor &t, uint64_t seed) {
  Tensor out = t.clone();
  if (t.dtype() != DType::F32)
    return out;
  RandomStream rng(seed, 2);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = (float)t.at(i);
    out.set(i, std::nextafter(v, rng.next() % 2 ? INFINITY : -INFINITY));
  }
  return out;
}

/// Equal (plain layouts), or within four times the float32 spread (blocked).
::testing::AssertionResult agrees(const Tensor &got, const Tensor &want, const Tensor &nudgedWant,
                                  bool exact) {
  if (got.numElements() != want.numElements())
    return ::testing::AssertionFailure()
           << got.numElements() << " elements, expected " << want.numElements();
  Distance d = distance(got, want);
  double bound = exact ? 0 : 4 * distance(nudgedWant, want).diff + 1e-6 * d.scale;
  if (d.diff <= bound)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "largest difference " << d.diff << " exceeds " << bound
                                       << " (largest magnitude " << d.scale << ")";
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
  TensorVariables ref, nudgedRef;
  for (const std::string &name : (*ex)->variableNames()) {
    ref.tensors[name] = *(*ex)->readVariable(name);
    nudgedRef.tensors[name] = nudged(ref.tensors[name], name.size());
  }
  for (uint64_t step = 0; step < 3; ++step) {
    llvm::StringMap<Tensor> feeds, nudgedFeeds;
    for (Node *in : (*m)->main().inputs()) {
      const TensorType &t = in->result()->type();
      if (in->name() == "lr")
        feeds["lr"] = Tensor::scalar(0.05f);
      else
        feeds[in->name()] = randomTensor(t, step * 7 + 1, in->name() == "labels", 10);
      nudgedFeeds[in->name()] =
          in->name() == "labels" ? feeds[in->name()] : nudged(feeds[in->name()], step + 11);
    }
    auto got = (*ex)->run(feeds);
    ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
    auto want = runGraph((*m)->main(), feeds, ref, step, 3);
    ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
    auto nudgedWant = runGraph((*m)->main(), nudgedFeeds, nudgedRef, step, 3);
    ASSERT_TRUE(bool(nudgedWant)) << llvm::toString(nudgedWant.takeError());
    ASSERT_EQ(got->size(), want->size()) << "the executor and the evaluator return "
                                         << got->size() << " and " << want->size() << " outputs";
    for (size_t o = 0; o < got->size(); ++o)
      EXPECT_TRUE(agrees((*got)[o], (*want)[o], (*nudgedWant)[o], !blocked))
          << model << " step " << step << " output " << o;
    for (auto &entry : ref.tensors) {
      Tensor mine = *(*ex)->readVariable(entry.getKey());
      EXPECT_TRUE(agrees(mine, entry.getValue(), nudgedRef.tensors[entry.getKey()], !blocked))
          << model << " step " << step << " variable " << entry.getKey().str();
    }
  }
}

} // namespace

TEST(ExecutorAgreement, MlpMomentum) { agree("mlp", 8, "momentum", false); }
TEST(ExecutorAgreement, SmallCnnWithBatchNormAdam) { agree("small_cnn", 6, "adam", false); }
TEST(ExecutorAgreement, SmallCnnNoBnRmsprop) { agree("small_cnn_nobn", 5, "rmsprop", false); }
TEST(ExecutorAgreement, SmallCnnBlockedLayouts) { agree("small_cnn", 16, "momentum", true); }
