// One momentum-SGD training step against PyTorch, through ONNX: the same
// weights (set from PyTorch's initial state), input and labels; compared are
// the loss, the logits, the gradient of every parameter, every parameter after
// the step and the BatchNorm running statistics. Tolerance: each tensor's
// largest difference within twice K·u of its largest magnitude, K the step's
// longest sum (tests/common/SumBound.h): both sides sum in float32, oneDNN and
// PyTorch each in orders of their own that depend on the CPU (small_cnn at
// batch 8: K = 6272, 7.5e-4; inception_v3 at 75 and batch 2: K = 2738, 3.3e-4).
//
// Where BatchNorm uses batch statistics in inception_v3 at small sizes, the
// gradient is so ill-conditioned that PyTorch's own float32 gradients differ
// from its float64 ones by up to 20% in some tensors (docs/reference-tests.md).
// There the truth is PyTorch in float64: loss and logits (per tensor),
// gradients and updated parameters (as the norm of the difference over all
// tensors, relative to the norm of the truth) and running statistics (each
// tensor's relative distance, pooled over tensors) must be no further from the
// truth than K·u (ours alone rounds) or four times PyTorch float32's own
// distance, whichever is larger: float32 rounding is amplified chaotically there, so two correct
// implementations can land a factor of two or three apart (ours was 2x
// PyTorch's with AVX-512 and 3.5x with AVX2 while oneDNN summed the batch
// statistics in float32; summed in double, as PyTorch does, it is 1.1x), while
// a wrong gradient is off by its whole size.

#include "SumBound.h"
#include "executor/Executor.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Cost.h"
#include "ir/Npy.h"
#include "passes/strategy/Compile.h"
#include "tools/driver/ModelSource.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace graphc;

namespace {

std::string referenceDir() {
  const char *d = std::getenv("GRAPHC_REFERENCE_DIR");
  return d ? d : GRAPHC_BINARY_DIR "/tests/reference/torch";
}

Tensor load(const std::string &path) {
  auto t = readNpy(path);
  if (!t) {
    ADD_FAILURE() << llvm::toString(t.takeError());
    return {};
  }
  return *t;
}

/// Largest |a - b| relative to the largest |b|.
double relativeError(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.numElements(), b.numElements());
  double diff = 0, scale = 1e-12;
  for (int64_t i = 0; i < std::min(a.numElements(), b.numElements()); ++i) {
    diff = std::max(diff, std::abs(a.at(i) - b.at(i)));
    scale = std::max(scale, std::abs(b.at(i)));
  }
  return diff / scale;
}

std::vector<std::string> npyNames(const std::string &dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef file = llvm::sys::path::filename(it->path());
    if (file.endswith(".npy"))
      names.push_back(file.drop_back(4).str());
  }
  llvm::sort(names);
  return names;
}

struct Case {
  const char *name;
  const char *bnMode;
  bool float64Truth;
};

/// Sums of squares of (mine - truth), (torch32 - truth) and truth over tensors.
struct NormTally {
  double floor; ///< K·u: how far float32 sums may be from float64's
  double mine = 0, torch32 = 0, truth = 0;
  void add(const Tensor &m, const Tensor &t32, const Tensor &t64) {
    for (int64_t i = 0; i < t64.numElements(); ++i) {
      mine += (m.at(i) - t64.at(i)) * (m.at(i) - t64.at(i));
      torch32 += (t32.at(i) - t64.at(i)) * (t32.at(i) - t64.at(i));
      truth += t64.at(i) * t64.at(i);
    }
  }
  void check(const char *what) const {
    double ours = std::sqrt(mine / truth), theirs = std::sqrt(torch32 / truth);
    EXPECT_LE(ours, std::max(floor, 4 * theirs))
        << what << ": ours " << ours << ", PyTorch float32 " << theirs << " from float64";
    std::printf("%s: relative distance from float64, ours %.3g, PyTorch float32 %.3g\n", what, ours,
                theirs);
    sumbound::report(std::string(what) + " against float64", ours, std::max(floor, 4 * theirs));
  }
};

/// Each tensor's largest difference from float64 relative to its largest
/// magnitude, for ours and for PyTorch float32, pooled over tensors as a root
/// mean square. The running statistics inherit the forward pass's amplified
/// rounding, and one tensor's PyTorch distance is a noisy estimate of how far
/// float32 may stray there (it varies tenfold between layers), so the bar is
/// set on the pool, with the same factor as the gradients.
struct SpreadTally {
  double floor; ///< as NormTally's
  double mine = 0, torch32 = 0;
  int tensors = 0;
  void add(const Tensor &m, const Tensor &t32, const Tensor &t64) {
    mine += std::pow(relativeError(m, t64), 2);
    torch32 += std::pow(relativeError(t32, t64), 2);
    ++tensors;
  }
  void check(const char *what) const {
    ASSERT_GT(tensors, 0) << what;
    double ours = std::sqrt(mine / tensors), theirs = std::sqrt(torch32 / tensors);
    EXPECT_LE(ours, std::max(floor, 4 * theirs))
        << what << ": ours " << ours << ", PyTorch float32 " << theirs << " from float64";
    sumbound::report(std::string(what) + " against float64", ours, std::max(floor, 4 * theirs));
    std::printf("%s: relative distance from float64 (rms over %d tensors), ours %.3g, PyTorch "
                "float32 %.3g\n",
                what, tensors, ours, theirs);
  }
};

/// Per tensor against PyTorch float32, or tallied against float64.
void compare(const std::string &what, const Tensor &mine, const std::string &dir,
             const std::string &file, NormTally *tally, double bound, double &worst) {
  Tensor torch32 = load(dir + "/" + file + ".npy");
  if (!tally) {
    double err = relativeError(mine, torch32);
    worst = std::max(worst, err);
    EXPECT_LE(err, bound) << what;
    return;
  }
  size_t slash = file.find('/');
  tally->add(mine, torch32,
             load(dir + "/" + file.substr(0, slash) + "64" + file.substr(slash) + ".npy"));
}

void checkCase(const Case &spec) {
  std::string dir = referenceDir() + "/" + spec.name;
  Tensor input = load(dir + "/input.npy"), labels = load(dir + "/labels.npy");
  int64_t batch = input.shape()[0];
  auto forward = importOnnxFile(dir + "/model.onnx", ImportOptions{});
  ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
  CompileRequest req;
  req.options.batch = batch;
  req.options.optimizer = "momentum";
  req.options.momentum = 0.9;
  req.options.learningRate = 0.1;
  req.options.bn = cantFail(parseBnMode(spec.bnMode));
  auto m = compileTraining(**forward, req);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  const double floor = sumbound::bound(longestSum((**forward).main(), batch)), bound = 2 * floor;
  double worst = 0;
  // Expose every gradient as an output.
  Graph &g = (*m)->main();
  std::vector<Value *> outs(g.outputs().begin(), g.outputs().end());
  std::map<std::string, size_t> gradOutput;
  for (Node *n : g.nodes())
    if (n->attrs().has("grad_of")) {
      gradOutput[n->attrs().getString("grad_of")] = outs.size();
      outs.push_back(n->result());
    }
  g.setOutputs(outs);
  auto ex = Executor::create(**m, {});
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  for (const std::string &var : npyNames(dir + "/before")) {
    llvm::Error e = (*ex)->writeVariable(var, load(dir + "/before/" + var + ".npy"));
    ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  }
  auto in = dataInput(**forward);
  ASSERT_TRUE(bool(in));
  llvm::StringMap<Tensor> feeds;
  feeds[(*in)->name()] = input;
  feeds["labels"] = labels;
  feeds["lr"] = Tensor::scalar(0.1f);
  auto got = (*ex)->run(feeds);
  ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());

  for (auto [index, what] : {std::pair<int, const char *>{0, "loss"}, {1, "logits"}}) {
    Tensor torch32 = load(dir + "/" + what + ".npy");
    if (!spec.float64Truth) {
      worst = std::max(worst, relativeError((*got)[index], torch32));
      EXPECT_LE(relativeError((*got)[index], torch32), bound) << what;
      continue;
    }
    Tensor truth = load(dir + "/" + what + "64.npy");
    double theirs = relativeError(torch32, truth);
    EXPECT_LE(relativeError((*got)[index], truth), std::max(floor, 4 * theirs))
        << what << " (PyTorch float32 is " << theirs << " from float64)";
  }
  std::vector<std::string> grads = npyNames(dir + "/grad");
  ASSERT_FALSE(grads.empty());
  NormTally gradTally{floor}, afterTally{floor};
  SpreadTally statistics{floor};
  for (const std::string &p : grads) {
    auto it = gradOutput.find(p);
    ASSERT_NE(it, gradOutput.end()) << "no gradient for parameter " << p;
    compare("gradient of " + p, (*got)[it->second], dir, "grad/" + p,
            spec.float64Truth ? &gradTally : nullptr, bound, worst);
  }
  EXPECT_EQ(gradOutput.size(), grads.size()) << "every trainable parameter, no more";
  for (const std::string &v : npyNames(dir + "/after")) {
    auto mine = (*ex)->readVariable(v);
    ASSERT_TRUE(bool(mine)) << llvm::toString(mine.takeError());
    bool statistic =
        llvm::StringRef(v).endswith("running_mean") || llvm::StringRef(v).endswith("running_var");
    if (statistic && spec.float64Truth) {
      statistics.add(*mine, load(dir + "/after/" + v + ".npy"),
                     load(dir + "/after64/" + v + ".npy"));
    } else
      compare(v + " after one step", *mine, dir, "after/" + v,
              spec.float64Truth ? &afterTally : nullptr, bound, worst);
  }
  if (!spec.float64Truth)
    sumbound::report(std::string(spec.name) + " against PyTorch float32", worst, bound);
  if (spec.float64Truth) {
    gradTally.check("gradients");
    afterTally.check("parameters after the step");
    statistics.check("running statistics");
  }
}

} // namespace

TEST(TrainingStepReference, SmallCnnMatchesPyTorch) {
  checkCase({"small_cnn", "local", false});
}

// An int64 graph input (token ids) into an embedding table (GatherGrad) and an
// LSTM unrolled at import.
TEST(TrainingStepReference, EmbeddingOfInt64TokensAndLstmMatchPyTorch) {
  checkCase({"embedding_lstm", "local", false});
}

TEST(TrainingStepReference, InceptionV3At75FrozenBatchNormMatchesPyTorch) {
  checkCase({"inception_v3_75_frozen_bn", "frozen", false});
}

TEST(TrainingStepReference, InceptionV3At107BatchStatisticsMatchesPyTorchFloat64) {
  checkCase({"inception_v3_107_batch_bn", "local", true});
}
