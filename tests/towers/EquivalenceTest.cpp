//===- EquivalenceTest.cpp - N towers train like one device -----------------===//
//
// The README's first promise (docs/towers.md): with the same global
// batch and initial weights, 1 to 4 towers in every parameter mode end with
// the parameters (and optimizer state) of the single-device graph after five
// momentum-SGD steps, for batches that divide by the tower count, batches
// that do not (uneven shares), a batch smaller than the tower count (an
// empty tower), shares proportional to --split weights, and --remainder drop.
// The same holds for a BatchNorm model under --bn sync, moving averages
// included. The single-device graph is the reference: it never sees a tower
// pass.
//
// The towers add each gradient in other groupings than the single device
// (per-tower partial sums, then AddN or an all-reduce in rank order; another
// thread count inside oneDNN's kernels), so the bar is the rounding bound of
// the step's longest sum, K·u of each tensor's largest value
// (tests/common/SumBound.h): mlp K = 784 (fc1's inner dimension, 4.7e-5),
// small_cnn at batch 12 K = 9408 (conv1's filter gradient over 12·28·28,
// 5.6e-4). A missing tower or a wrong 1/T is off by 1e-2 and more. One tower
// groups every sum as the single device does: the same bits.
//
//===----------------------------------------------------------------------===//

#include "TowerTestUtil.h"
#include "ir/Cluster.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

constexpr int kSteps = 5;
// Small enough that five steps on one batch stay well conditioned (at 0.1 the
// BatchNorm CNN's loss jumps, and rounding differences grow with it).
constexpr float kLearningRate = 0.02f;

struct Case {
  std::string model;
  int64_t batch;
  int towers;
  std::string params;
  std::string bn = "local";
  std::vector<double> split = {}; ///< --split weights (mixed devices)
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << c.model << " batch " << c.batch << ", " << c.towers << " towers, params " << c.params
      << ", bn " << c.bn;
}

models::ModelOptions modelOptions(const std::string &model) {
  models::ModelOptions o;
  if (model == "small_cnn_nobn" || model == "small_cnn")
    o.dropout = 0; // masks differ per tower by design; equivalence needs none
  return o;
}

CompileOptions compileOptions(const Case &c) {
  CompileOptions o;
  o.batch = c.batch;
  o.towers = c.towers;
  o.params = cantFail(parseParamPlacement(c.params));
  o.remainder = cantFail(parseRemainderPolicy("uneven"));
  o.bn = cantFail(parseBnMode(c.bn));
  if (!c.split.empty())
    o.split = {SplitSpec::Weights, c.split};
  o.momentum = 0.9;
  o.bucketBytes = 64 << 10; // several buckets even for these small models
  return o;
}

/// The single-device reference for (model, batch), computed once.
const std::map<std::string, Tensor> &reference(const std::string &model, int64_t batch) {
  static std::map<std::pair<std::string, int64_t>, std::map<std::string, Tensor>> cache;
  auto key = std::make_pair(model, batch);
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  return cache[key] =
             trainSingleDevice(model, modelOptions(model), batch, kSteps, kLearningRate).variables;
}

class Equivalence : public testing::TestWithParam<Case> {};

TEST_P(Equivalence, SameParametersAsOneDevice) {
  const Case &c = GetParam();
  const auto &want = reference(c.model, c.batch);
  ASSERT_FALSE(want.empty());
  auto m = buildOrFail(c.model, modelOptions(c.model));
  ASSERT_TRUE(m);
  llvm::Error err = compileTowers(*m, compileOptions(c));
  ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
  auto ex = makeExecutor(*m);
  ASSERT_TRUE(ex);
  Batch b = randomBatch(m->main().findInput("input")->result()->type(), 10, 42);
  auto out = train(*ex, b, kSteps, kLearningRate);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  const std::string what = c.model + " batch " + std::to_string(c.batch) + ", " +
                           std::to_string(c.towers) + " towers, params " + c.params + ", bn " +
                           c.bn;
  // One tower sums as the single device does (the same batch, kernels and
  // threads), but for --bn sync, which computes the statistics its own way.
  if (c.towers == 1 && c.bn == "local")
    expectSameBits(variables(*ex), want, what);
  else
    expectWithinBound(variables(*ex), want, stepBound(c.model, modelOptions(c.model), c.batch),
                      what);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char *model : {"mlp", "small_cnn_nobn"})
    for (const char *params : {"cpu", "gpu:0", "spread", "mirrored"}) {
      for (int64_t batch : {12, 7})
        for (int towers = 1; towers <= 4; ++towers)
          out.push_back({model, batch, towers, params});
      out.push_back({model, 3, 4, params}); // tower 3 is empty
    }
  // Batch statistics over all towers: the same as one device on the global
  // batch, moving averages included.
  for (const char *params : {"cpu", "gpu:0", "spread", "mirrored"}) {
    for (int64_t batch : {12, 7})
      for (int towers = 1; towers <= 4; ++towers)
        out.push_back({"small_cnn", batch, towers, params, "sync"});
    out.push_back({"small_cnn", 3, 4, params, "sync"});
  }
  // Mixed devices: shares proportional to --split weights.
  out.push_back({"mlp", 11, 3, "mirrored", "local", {4, 4, 2}});
  out.push_back({"mlp", 7, 2, "spread", "local", {3, 1}});
  out.push_back({"small_cnn_nobn", 10, 3, "cpu", "local", {4, 4, 2}});
  return out;
}

std::string caseName(const testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  std::string params = c.params == "gpu:0" ? "gpu0" : c.params;
  return c.model + "_B" + std::to_string(c.batch) + "_N" + std::to_string(c.towers) + "_" + params +
         (c.bn == "local" ? "" : "_" + c.bn) + (c.split.empty() ? "" : "_weighted");
}

INSTANTIATE_TEST_SUITE_P(Towers, Equivalence, testing::ValuesIn(cases()), caseName);

// --split auto on a cluster whose third GPU runs at half speed: the tools
// turn it into the devices' speeds as weights (Cluster::towerSpeeds), here
// 2:2:1, and training on the uneven shares, with that GPU's device really
// emulated at half speed, equals one device on the global batch.
TEST(Equivalence, SplitAutoOnAHalfSpeedGpuTrainsLikeOneDevice) {
  const int64_t batch = 10;
  const auto &want = reference("small_cnn", batch);
  ASSERT_FALSE(want.empty());
  auto cluster = Cluster::create({{"cpu:0", DeviceKind::CPU, 1LL << 40, 1},
                                  {"gpu:0", DeviceKind::GPU, 1LL << 36, 1},
                                  {"gpu:1", DeviceKind::GPU, 1LL << 36, 1},
                                  {"gpu:2", DeviceKind::GPU, 1LL << 36, 0.5}},
                                 {});
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  auto speeds = cluster->towerSpeeds(3);
  ASSERT_TRUE(bool(speeds)) << llvm::toString(speeds.takeError());
  auto m = buildOrFail("small_cnn", modelOptions("small_cnn"));
  ASSERT_TRUE(m);
  CompileOptions o = compileOptions({"small_cnn", batch, 3, "mirrored", "sync"});
  o.split = {SplitSpec::Weights, *speeds};
  llvm::Error err = compileTowers(*m, o);
  ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
  EXPECT_EQ(m->plan().towerBatches, (Ints{4, 4, 2}));
  ExecutorOptions eo;
  eo.threads = 2;
  eo.seed = 7;
  eo.deviceMap = emulate;
  eo.relativeSpeed[emulate(DeviceId::gpu(2))] = 0.5; // cpu:3
  auto ex = Executor::create(*m, std::move(eo));
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  Batch b = randomBatch(m->main().findInput("input")->result()->type(), 10, 42);
  auto out = train(**ex, b, kSteps, kLearningRate);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  expectWithinBound(variables(**ex), want, stepBound("small_cnn", modelOptions("small_cnn"), batch),
                    "small_cnn, --split auto 2:2:1");
}

// --remainder drop: the compiled global batch is the largest multiple of the
// tower count, and training on it equals one device on those samples.
TEST(Equivalence, DropTrainsLikeOneDeviceOnTheKeptSamples) {
  auto m = buildOrFail("mlp", {});
  ASSERT_TRUE(m);
  CompileOptions o;
  o.batch = 7;
  o.towers = 4;
  o.remainder = cantFail(parseRemainderPolicy("drop"));
  o.params = cantFail(parseParamPlacement("mirrored"));
  llvm::Error err = compileTowers(*m, o);
  ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
  ASSERT_EQ(m->batch(), 4);
  auto ex = makeExecutor(*m);
  ASSERT_TRUE(ex);
  TensorType seven = m->main().findInput("input")->result()->type();
  seven.shape[0] = 7;
  Batch kept = firstRows(randomBatch(seven, 10, 42), 4);
  auto out = train(*ex, kept, kSteps, kLearningRate);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());

  auto single = buildOrFail("mlp", {});
  ASSERT_TRUE(single);
  CompileOptions one;
  one.batch = 4;
  ASSERT_FALSE(bool(runPipeline(*single, kSingleDevicePipeline, one)));
  auto reference = makeExecutor(*single);
  ASSERT_TRUE(reference);
  auto refOut = train(*reference, kept, kSteps, kLearningRate);
  ASSERT_TRUE(bool(refOut)) << llvm::toString(refOut.takeError());
  expectWithinBound(variables(*ex), variables(*reference), stepBound("mlp", {}, 4),
                    "drop 7 -> 4 on 4 towers");
}

} // namespace
