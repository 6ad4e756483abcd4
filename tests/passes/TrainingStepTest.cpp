//===- TrainingStepTest.cpp - The default training pipeline, run -------------===//
//
// Compiles the small conv/bn/dropout/fc model from the golden files with the
// default training pipeline and runs steps with runGraph: the moving averages
// follow the batch statistics computed here independently, SGD moves each
// parameter by exactly -lr·gradient, frozen BatchNorm keeps its statistics
// while its scale and bias train, and the loss falls on a batch it can fit.
//
//===----------------------------------------------------------------------===//

#include "PassTestUtil.h"

#include "ir/Initializers.h"
#include "ir/Parser.h"
#include "ir/Random.h"
#include "kernels/KernelRunner.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace graphc;

namespace {

const char *const kModel = GRAPHC_SOURCE_DIR "/tests/passes/golden/pipeline/tiny_cnn.gir";
constexpr int64_t kBatch = 4;

struct Trainer {
  std::unique_ptr<Module> m;
  TensorVariables vars;
  llvm::StringMap<Tensor> inputs;
  std::vector<std::string> params; ///< in the order their gradients were appended as outputs
  uint64_t step = 0;

  /// Compiles with the default pipeline and `options`; extra graph outputs
  /// (after loss and logits): the named values, then every gradient.
  void compile(llvm::StringRef options, llvm::ArrayRef<std::string> extra = {}) {
    auto parsed = parseModuleFile(kModel);
    ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
    m = std::move(*parsed);
    auto o = passtest::parseOptions(options);
    ASSERT_TRUE(bool(o)) << llvm::toString(o.takeError());
    ASSERT_FALSE(bool(passtest::runPipeline(*m, "default", *o)));
    Graph &g = m->main();
    for (const std::string &name : extra) {
      Value *v = g.findValue(name);
      ASSERT_TRUE(v) << name;
      g.addOutput(v);
    }
    for (Node *n : g.nodes())
      if (n->attrs().has("grad_of")) {
        params.push_back(n->attrs().getString("grad_of"));
        g.addOutput(n->result());
      }
    for (const Variable &v : m->variables()) {
      auto t = initialValue(v, 7);
      ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
      vars.tensors[v.name] = *t;
    }
    RandomStream r(3, 0);
    Tensor x(TensorType(DType::F32, {kBatch, 3, 8, 8}));
    for (int64_t i = 0; i < x.numElements(); ++i)
      x.set(i, r.normal());
    inputs["x"] = x;
    inputs["labels"] = Tensor::fromInts({kBatch}, {0, 3, 1, 4});
    inputs["lr"] = Tensor::scalar(0.1f);
  }

  std::vector<Tensor> run() {
    auto out = runGraph(m->main(), inputs, vars, step++, /*seed=*/5);
    EXPECT_TRUE(bool(out)) << (out ? "" : llvm::toString(out.takeError()));
    return out ? std::move(*out) : std::vector<Tensor>{};
  }

  Tensor snapshot(llvm::StringRef var) { return vars.tensors[var].clone(); }
};

TEST(TrainingStep, DefaultPipelineIsTheContract) {
  EXPECT_STREQ(kDefaultTrainingPipeline,
               "bind-batch,training-mode,add-loss,mixed-precision,autodiff,add-optimizer,"
               "replicate-towers,"
               "split-batch,concat-outputs,accumulate-gradients,aggregate-gradients,loss-scaling,"
               "fuse-bn-relu,dce,verify");
}

TEST(TrainingStep, MovingAveragesFollowTheBatchStatistics) {
  Trainer t;
  ASSERT_NO_FATAL_FAILURE(t.compile("batch=4 optimizer=sgd", {"tower_0/conv1/conv"}));
  Tensor mean0 = t.snapshot("conv1.bn.running_mean"), var0 = t.snapshot("conv1.bn.running_var");
  auto out = t.run();
  ASSERT_GE(out.size(), 3u);
  const Tensor &conv = out[2]; // [4, 4, 8, 8]
  const int64_t channels = 4, perChannel = kBatch * 8 * 8;
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < kBatch; ++n)
      for (int64_t i = 0; i < 64; ++i)
        sum += conv.at((n * channels + c) * 64 + i);
    double mean = sum / perChannel;
    for (int64_t n = 0; n < kBatch; ++n)
      for (int64_t i = 0; i < 64; ++i)
        sq += std::pow(conv.at((n * channels + c) * 64 + i) - mean, 2);
    double unbiased = sq / (perChannel - 1);
    EXPECT_NEAR(t.vars.tensors["conv1.bn.running_mean"].at(c), 0.9 * mean0.at(c) + 0.1 * mean, 1e-5)
        << "channel " << c;
    EXPECT_NEAR(t.vars.tensors["conv1.bn.running_var"].at(c), 0.9 * var0.at(c) + 0.1 * unbiased,
                1e-4 * (1 + unbiased))
        << "channel " << c;
  }
}

TEST(TrainingStep, SgdMovesEachParameterByMinusLrTimesItsGradient) {
  Trainer t;
  ASSERT_NO_FATAL_FAILURE(t.compile("batch=4 optimizer=sgd"));
  ASSERT_EQ(t.params.size(), 5u); // conv weight, bn scale and bias, fc weight and bias
  std::vector<Tensor> before;
  for (const std::string &p : t.params)
    before.push_back(t.snapshot(p));
  auto out = t.run();
  ASSERT_EQ(out.size(), 2 + t.params.size());
  for (size_t k = 0; k < t.params.size(); ++k) {
    const Tensor &grad = out[2 + k], &after = t.vars.tensors[t.params[k]];
    double norm = 0;
    for (int64_t i = 0; i < grad.numElements(); ++i) {
      norm += std::abs(grad.at(i));
      EXPECT_NEAR(after.at(i), before[k].at(i) - 0.1 * grad.at(i), 1e-6)
          << t.params[k] << "[" << i << "]";
    }
    EXPECT_GT(norm, 0) << t.params[k] << " got a zero gradient";
  }
}

TEST(TrainingStep, FrozenBatchNormKeepsItsStatisticsAndTrainsItsAffine) {
  Trainer t;
  ASSERT_NO_FATAL_FAILURE(t.compile("batch=4 optimizer=sgd bn=frozen"));
  Tensor mean0 = t.snapshot("conv1.bn.running_mean"), scale0 = t.snapshot("conv1.bn.weight");
  t.run();
  EXPECT_TRUE(t.vars.tensors["conv1.bn.running_mean"] == mean0);
  EXPECT_FALSE(t.vars.tensors["conv1.bn.weight"] == scale0);
}

TEST(TrainingStep, LossFallsOnABatchItCanFit) {
  Trainer t;
  ASSERT_NO_FATAL_FAILURE(t.compile("batch=4 optimizer=momentum"));
  t.inputs["lr"] = Tensor::scalar(0.03f);
  // Dropout makes single steps noisy: compare means over the first and the
  // last ten steps.
  std::vector<double> losses;
  for (int i = 0; i < 40; ++i) {
    auto out = t.run();
    ASSERT_FALSE(out.empty());
    losses.push_back(out[0].at(0));
  }
  double head = 0, tail = 0;
  for (size_t i = 0; i < 10; ++i) {
    head += losses[i] / 10;
    tail += losses[losses.size() - 1 - i] / 10;
  }
  std::string trace;
  llvm::raw_string_ostream os(trace);
  for (double l : losses)
    os << " " << l;
  EXPECT_LT(tail, 0.75 * head) << "losses:" << trace;
}

} // namespace
