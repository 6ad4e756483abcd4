//===- AccumulateTest.cpp - K micro-batches train like one batch of K·B -----===//
//
// Gradient accumulation (passes/AccumulateGradients.h): an update of K
// micro-batches of B samples, run as K−1 runs of graph "micro" and one of
// main, ends with the parameters and optimizer state of one step on the K·B
// samples, for BN-free models, with and without towers, in the parameter
// modes; the reported loss is the mean over the K·B samples. The reference is
// the single-device graph on the large batch: it never sees a tower or
// accumulation pass. The micro-step graph joins no towers and communicates
// nothing; accumulators are zero between updates and never checkpointed.
//
// The micro-batches and towers split the large batch's sums, and the
// accumulators add the parts in f32, so the bar is the rounding bound of the
// large batch's longest sum (tests/common/SumBound.h): K·u of each tensor's
// largest value, K = 784 for mlp, 16·784 = 12544 for small_cnn_nobn at 4 x 4.
//
//===----------------------------------------------------------------------===//

#include "TowerTestUtil.h"
#include "passes/AccumulateGradients.h"
#include "passes/PsPart.h"
#include "placement/analysis/CostModel.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

constexpr int kSteps = 4;
constexpr float kLearningRate = 0.02f;

const char *const kAccumulatePipeline =
    "bind-batch,training-mode,add-loss,autodiff,add-optimizer,replicate-towers,split-batch,"
    "concat-outputs,accumulate-gradients,aggregate-gradients,dce,verify";

models::ModelOptions noDropout(const std::string &model) {
  models::ModelOptions o;
  if (model != "mlp")
    o.dropout = 0; // masks are drawn per micro-batch; equality needs none
  return o;
}

struct Case {
  std::string model;
  int64_t batch; ///< the micro-batch
  unsigned accumulate;
  int towers;
  std::string params;
  std::string bn = "local";
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << c.model << " batch " << c.batch << " x " << c.accumulate << ", " << c.towers
      << " towers, params " << c.params << ", bn " << c.bn;
}

CompileOptions compileOptions(const Case &c) {
  CompileOptions o;
  o.batch = c.batch;
  o.accumulate = c.accumulate;
  o.towers = c.towers;
  o.params = cantFail(parseParamPlacement(c.params));
  o.bn = cantFail(parseBnMode(c.bn));
  o.momentum = 0.9;
  o.bucketBytes = 64 << 10;
  return o;
}

/// Compiles with accumulation, places as the tower tests do.
llvm::Error compileAccumulating(Module &m, const CompileOptions &o) {
  if (auto e = runPipeline(m, kAccumulatePipeline, o))
    return e;
  assignRequested(m);
  return runPipeline(m, "insert-transfers,verify", o);
}

std::unique_ptr<Executor> makeAccumulatingExecutor(const Module &m) {
  ExecutorOptions eo;
  eo.threads = 2;
  eo.seed = 7;
  eo.deviceMap = emulate;
  eo.waitTimeout = std::chrono::seconds(60);
  eo.graphs = {kMicroGraph.str()};
  auto ex = Executor::create(m, std::move(eo));
  if (!ex) {
    ADD_FAILURE() << llvm::toString(ex.takeError());
    return nullptr;
  }
  return std::move(*ex);
}

/// Rows [first, first + rows) of a batch.
Batch rowsOf(const Batch &b, int64_t first, int64_t rows) {
  auto cut = [&](const Tensor &t) {
    TensorType type = t.type();
    size_t rowBytes = t.bytes() / (size_t)type.shape[0];
    type.shape[0] = rows;
    Tensor out(type);
    std::memcpy(out.raw(), (const char *)t.raw() + first * rowBytes, rows * rowBytes);
    return out;
  };
  return {cut(b.x), cut(b.labels)};
}

/// `steps` updates, each on the K micro-batches of `big` in order; returns
/// main's outputs of the last.
llvm::Expected<std::vector<Tensor>> trainAccumulating(Executor &ex, const Batch &big, int64_t micro,
                                                      unsigned k, int steps) {
  std::vector<Tensor> out;
  for (int s = 0; s < steps; ++s)
    for (unsigned i = 0; i < k; ++i) {
      Batch b = rowsOf(big, i * micro, micro);
      llvm::StringMap<Tensor> feeds;
      feeds["input"] = b.x;
      feeds["labels"] = b.labels;
      if (i + 1 < k) {
        auto r = ex.run(kMicroGraph, feeds);
        if (!r)
          return r.takeError();
        continue;
      }
      feeds["lr"] = Tensor::scalar(kLearningRate);
      auto r = ex.run(feeds);
      if (!r)
        return r.takeError();
      out = std::move(*r);
    }
  return out;
}

/// One device, one batch of K·B: variables and the loss of the last step.

const SingleDeviceRun &reference(const std::string &model, int64_t batch) {
  static std::map<std::pair<std::string, int64_t>, SingleDeviceRun> cache;
  auto key = std::make_pair(model, batch);
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  return cache[key] = trainSingleDevice(model, noDropout(model), batch, kSteps, kLearningRate);
}

class Accumulation : public testing::TestWithParam<Case> {};

TEST_P(Accumulation, EqualsOneStepOnTheLargerBatch) {
  const Case &c = GetParam();
  const int64_t large = c.batch * c.accumulate;
  const SingleDeviceRun &want = reference(c.model, large);
  ASSERT_FALSE(want.variables.empty());
  auto m = buildOrFail(c.model, noDropout(c.model));
  ASSERT_TRUE(m);
  llvm::Error err = compileAccumulating(*m, compileOptions(c));
  ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
  ASSERT_EQ(cantFail(accumulationSteps(*m)), c.accumulate);
  auto ex = makeAccumulatingExecutor(*m);
  ASSERT_TRUE(ex);
  TensorType x = m->main().findInput("input")->result()->type();
  x.shape[0] = large;
  Batch big = randomBatch(x, 10, 42);
  auto out = trainAccumulating(*ex, big, c.batch, c.accumulate, kSteps);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(ex->step(), (uint64_t)kSteps) << "steps count updates";
  // The reported loss is the mean over the update's samples.
  const double rel = stepBound(c.model, noDropout(c.model), large);
  EXPECT_NEAR((*out)[0].at(0), want.loss, rel * std::abs(want.loss));
  // Accumulators are not among the variables a checkpoint takes.
  auto got = variables(*ex);
  for (const auto &[name, value] : got)
    EXPECT_TRUE(m->findVariable(name)->persistent()) << name;
  std::string what = c.model + " " + std::to_string(c.batch) + " x " +
                     std::to_string(c.accumulate) + ", " + std::to_string(c.towers) +
                     " towers, params " + c.params;
  expectWithinBound(got, want.variables, rel, what);
  // ... and they are zero between updates.
  for (const Variable &v : m->variables())
    if (!v.persistent()) {
      auto t = ex->readVariable(v.name);
      ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
      EXPECT_TRUE(sumbound::sameBits(*t, Tensor(t->type()))) << v.name << " after " << what;
    }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char *model : {"mlp", "small_cnn_nobn"}) {
    out.push_back({model, 4, 4, 0, "cpu"}); // the single-device graph
    for (const char *params : {"cpu", "mirrored"})
      for (int towers : {1, 2, 4})
        out.push_back({model, 4, 4, towers, params});
    out.push_back({model, 5, 3, 2, "spread"}); // uneven towers
    out.push_back({model, 3, 2, 4, "gpu:0"});  // tower 3 gets nothing
  }
  return out;
}

std::string caseName(const testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  std::string params = c.params == "gpu:0" ? "gpu0" : c.params;
  return c.model + "_B" + std::to_string(c.batch) + "_K" + std::to_string(c.accumulate) + "_N" +
         std::to_string(c.towers) + "_" + params;
}

INSTANTIATE_TEST_SUITE_P(Towers, Accumulation, testing::ValuesIn(cases()), caseName);

/// Compiles small_cnn (BatchNorm, no dropout) with towers, accumulating.
std::unique_ptr<Module> bnModule(int towers, const std::string &bn, unsigned k, int64_t batch) {
  auto m = buildOrFail("small_cnn", noDropout("small_cnn"));
  if (!m)
    return nullptr;
  Case c{"small_cnn", batch, k, towers, "mirrored", bn};
  if (auto e = compileAccumulating(*m, compileOptions(c))) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  return m;
}

// BatchNorm's statistics are the micro-batch's and its moving averages are
// updated once per micro-batch. Without towers that is the running
// statistics' own Assign in both graphs; with towers, each tower's view of
// them during the micro-steps, weighted at the update. Under --bn sync the
// statistics span the towers, and with one tower they are the micro-batch's,
// so both must accumulate exactly as the graph without towers does, moving
// averages included.
TEST(Accumulation, BatchNormTowersAccumulateLikeTheSingleDeviceGraph) {
  // 4 samples per tower and micro-step: at 2 (batch 6) --bn sync's statistics
  // are so ill-conditioned that oneDNN's AVX2 kernels, summing in another
  // order, drift 1e-3 from the single-device graph within four steps.
  const int64_t batch = 12;
  const unsigned k = 3;
  auto trainOn = [&](int towers, const std::string &bn) {
    std::map<std::string, Tensor> result;
    auto m = bnModule(towers, bn, k, batch);
    auto ex = m ? makeAccumulatingExecutor(*m) : nullptr;
    if (!ex)
      return result;
    TensorType x = m->main().findInput("input")->result()->type();
    x.shape[0] = batch * k;
    auto out = trainAccumulating(*ex, randomBatch(x, 10, 42), batch, k, kSteps);
    if (!out) {
      ADD_FAILURE() << llvm::toString(out.takeError());
      return result;
    }
    return variables(*ex);
  };
  auto want = trainOn(0, "local");
  ASSERT_TRUE(want.count("bn1.running_mean"));
  // The micro-batch's sums bound the statistics' (K = 12·784 = 9408, 5.6e-4).
  const double rel = stepBound("small_cnn", noDropout("small_cnn"), batch);
  expectWithinBound(trainOn(1, "local"), want, rel, "small_cnn 1 tower");
  expectWithinBound(trainOn(3, "sync"), want, rel, "small_cnn 3 towers, --bn sync");
}

// The micro-step graph communicates nothing: no collective, no update, no
// sum over towers, no transfer to the parameters' host, no outputs and no
// learning rate; the update graph all-reduces as often as without
// accumulation.
TEST(Accumulation, MicroStepsJoinNoTowers) {
  auto plan = [](unsigned k) {
    auto m = buildOrFail("small_cnn_nobn", noDropout("small_cnn_nobn"));
    Case c{"small_cnn_nobn", 8, k, 2, "mirrored"};
    if (!m)
      return m;
    if (auto e = compileAccumulating(*m, compileOptions(c))) {
      ADD_FAILURE() << llvm::toString(std::move(e));
      m.reset();
    }
    return m;
  };
  auto accumulating = plan(3), plain = plan(1);
  ASSERT_TRUE(accumulating && plain);
  EXPECT_EQ(plain->findGraph(kMicroGraph), nullptr);
  const Graph *micro = accumulating->findGraph(kMicroGraph);
  ASSERT_TRUE(micro);
  EXPECT_TRUE(micro->outputs().empty());
  EXPECT_EQ(micro->findInput("lr"), nullptr);
  unsigned accumulates = 0;
  for (const Node *n : micro->nodes()) {
    EXPECT_NE(n->op(), Op::AllReduce) << n->name();
    EXPECT_NE(n->op(), Op::ConcatBatch) << n->name();
    EXPECT_FALSE(isVariableUpdate(n->op()) && n->op() != Op::Assign) << n->name();
    if (n->op() == Op::Assign) {
      EXPECT_FALSE(accumulating->findVariable(n->attrs().getString("var"))->persistent())
          << n->name();
      ++accumulates;
    }
    if (n->op() == Op::Transfer) {
      EXPECT_EQ(n->attrs().getString("from"), "cpu:0") << n->name() << ": only the data moves";
    }
    EXPECT_FALSE(n->op() == Op::AddN && n->tower() < 0) << n->name();
  }
  // One accumulator per gradient and tower, and the loss of each tower.
  size_t trainable = 0;
  for (const Variable &v : accumulating->variables())
    trainable += v.trainable();
  EXPECT_EQ(accumulates, 2 * (trainable + 1));
  auto count = [](Module &m, Op op) {
    return llvm::count_if(m.main().nodes(), [op](const Node *n) { return n->op() == op; });
  };
  EXPECT_GT(count(*plain, Op::AllReduce), 0);
  EXPECT_EQ(count(*accumulating, Op::AllReduce), count(*plain, Op::AllReduce));
  EXPECT_EQ(accumulating->plan().accumulate, 3);
  // The cost model counts an update: the micro-steps twice, main once; the
  // all-reduce bytes of one step.
  Cluster cluster = Cluster::defaultCluster(2);
  auto plainCost = estimatePlacementCost(*plain, cluster);
  auto updateCost = estimatePlacementCost(*accumulating, cluster);
  ASSERT_TRUE(plainCost && updateCost);
  for (size_t d = 1; d < 3; ++d) {
    const DeviceCost &a = plainCost->devices[d], &b = updateCost->devices[d];
    ASSERT_EQ(a.device, d == 1 ? "gpu:0" : "gpu:1");
    EXPECT_NEAR((double)b.flops / (double)a.flops, 3.0, 0.05) << a.device;
    EXPECT_EQ(b.allReduceBytes, a.allReduceBytes) << a.device;
  }
}

TEST(Accumulation, BadInput) {
  EXPECT_EQ(cantFail(parseAccumulateSteps("4")), 4u);
  for (const char *bad : {"0", "-2", "2.5", "four", "", "99999999999"}) {
    auto k = parseAccumulateSteps(bad);
    ASSERT_FALSE(bool(k)) << bad;
    std::string msg = llvm::toString(k.takeError());
    EXPECT_NE(msg.find("--accumulate"), std::string::npos) << msg;
    EXPECT_NE(msg.find("whole number"), std::string::npos) << msg;
  }
  // Twice is refused, and so is an asynchronous parameter server.
  auto m = buildOrFail("mlp", {});
  ASSERT_TRUE(m);
  CompileOptions o = compileOptions({"mlp", 4, 2, 1, "cpu"});
  llvm::Error err = runPipeline(*m, kAccumulatePipeline, o);
  ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
  auto again = accumulateGradients(*m, {2});
  ASSERT_FALSE(bool(again));
  EXPECT_NE(llvm::toString(again.takeError()).find("already accumulates"), std::string::npos);
  llvm::Error async = shardOverPs(*m, 1, /*async=*/true);
  ASSERT_TRUE(bool(async));
  std::string msg = llvm::toString(std::move(async));
  EXPECT_NE(msg.find("--ps-async"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--accumulate 2"), std::string::npos) << msg;
  EXPECT_FALSE(bool(shardOverPs(*m, 1, /*async=*/false)));
  // A plan whose meta and graphs disagree.
  m->plan().accumulate = 1;
  EXPECT_FALSE(bool(accumulationSteps(*m)));
  llvm::consumeError(accumulationSteps(*m).takeError());
}

} // namespace
