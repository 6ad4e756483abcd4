//===- ShardOptimizerTest.cpp - --shard-optimizer trains like mirrored -------===//
//
// Sharded optimizer state (passes/AggregateGradients.h, docs/placement.md):
// each tower reduce-scatters its gradients, updates its piece of every
// variable with its piece of the slots, and all-gathers the pieces. The
// reduce-scatter sums each element in the all-reduce's order (rank order,
// from zero), and an update is elementwise, so the parameters and optimizer
// state equal the unsharded mirrored plan's bit for bit, on 2 and 4 emulated
// GPUs, with momentum and Adam, pieces of uneven sizes included (small_cnn's
// 10-element bias over 4 towers: 2, 3, 2, 3). Against one device they are
// within the bound of the towers' other grouping of the sums
// (EquivalenceTest.cpp). Each device holds its piece of the slots: the
// executor's and the cost model's variable bytes drop by the slots' (N-1)/N.
//
//===----------------------------------------------------------------------===//

#include "TowerTestUtil.h"
#include "placement/analysis/CostModel.h"

#include <sstream>

using namespace graphc;
using namespace graphc::towertest;

namespace {

constexpr int kSteps = 3;
constexpr float kLearningRate = 0.02f;

struct Case {
  std::string model;
  int towers;
  std::string optimizer;
  int64_t batch = 12;
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << c.model << " " << c.towers << " towers " << c.optimizer << " batch " << c.batch;
}

models::ModelOptions modelOptions(const std::string &model) {
  models::ModelOptions o;
  if (model == "small_cnn" || model == "small_cnn_nobn")
    o.dropout = 0;
  if (model == "inception_v3") {
    o.imageSize = 75; // its smallest input: a few seconds a step on two cores
    o.numClasses = 10;
  }
  return o;
}

CompileOptions compileOptions(const Case &c, bool shard) {
  CompileOptions o;
  o.batch = c.batch;
  o.towers = c.towers;
  o.params = cantFail(parseParamPlacement("mirrored"));
  o.optimizer = c.optimizer;
  o.bucketBytes = 64 << 10; // several buckets even for the small models
  o.shardOptimizer = shard;
  return o;
}

struct TowerRun {
  std::unique_ptr<Module> module;
  std::unique_ptr<Executor> executor;
  std::map<std::string, Tensor> variables;
};

TowerRun trainTowers(const Case &c, bool shard, bool blockedLayouts = true) {
  TowerRun r;
  r.module = buildOrFail(c.model, modelOptions(c.model));
  if (!r.module)
    return r;
  if (llvm::Error e = compileTowers(*r.module, compileOptions(c, shard))) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return r;
  }
  r.executor = makeExecutor(*r.module, 7, true, blockedLayouts);
  if (!r.executor)
    return r;
  Batch b = randomBatch(r.module->main().findInput("input")->result()->type(), 10, 42);
  auto out = train(*r.executor, b, kSteps, kLearningRate);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return r;
  }
  r.variables = variables(*r.executor);
  return r;
}

int64_t count(const Module &m, Op op) {
  int64_t n = 0;
  for (const Node *node : m.findGraph("main")->nodes())
    n += node->op() == op;
  return n;
}

class ShardOptimizer : public testing::TestWithParam<Case> {};

TEST_P(ShardOptimizer, SameBitsAsMirroredAndOneNthOfTheSlotsPerDevice) {
  const Case &c = GetParam();
  TowerRun sharded = trainTowers(c, true), mirrored = trainTowers(c, false);
  ASSERT_TRUE(sharded.executor && mirrored.executor);
  ASSERT_FALSE(mirrored.variables.empty());
  std::ostringstream what;
  PrintTo(c, &what);
  expectSameBits(sharded.variables, mirrored.variables, what.str());

  // The plan: reduce-scatters instead of the gradient all-reduces, one
  // all-gather per trained variable and tower, every slot sharded.
  const Module &m = *sharded.module;
  EXPECT_EQ(count(m, Op::ReduceScatter),
            count(*mirrored.module, Op::AllReduce) - count(m, Op::AllReduce));
  int64_t trained = 0, slotBytes = 0;
  for (const Variable &v : m.variables()) {
    trained += v.trainable();
    if (v.kind == VarKind::Slot) {
      EXPECT_TRUE(v.sharded) << v.name;
      slotBytes += v.type.bytes();
    }
  }
  EXPECT_EQ(count(m, Op::AllGather), trained * c.towers);
  if (c.optimizer != "sgd") {
    ASSERT_GT(slotBytes, 0);
  }

  // Memory: each device holds the replica less (N-1)/N of the slots, to
  // within an element per slot; the cost model says the same.
  std::vector<DeviceMemory> a = sharded.executor->memory(), b = mirrored.executor->memory();
  ASSERT_EQ(a.size(), b.size());
  int64_t slots = 0;
  for (const Variable &v : m.variables())
    slots += v.kind == VarKind::Slot;
  int64_t heldSum = 0;
  for (size_t d = 0; d < a.size(); ++d) {
    int64_t held = b[d].variableBytes - a[d].variableBytes;
    if (a[d].device.rfind("cpu:0", 0) == 0)
      continue;                       // the host holds no replica
    int64_t piece = slotBytes - held; // what this device keeps of the slots
    EXPECT_NEAR((double)piece, (double)slotBytes / c.towers, 4.0 * slots) << a[d].device;
    heldSum += piece;
  }
  EXPECT_EQ(heldSum, slotBytes);
  Cluster cluster = Cluster::defaultCluster(c.towers);
  auto shardedCost = estimatePlacementCost(m, cluster);
  auto mirroredCost = estimatePlacementCost(*mirrored.module, cluster);
  ASSERT_TRUE(bool(shardedCost)) << llvm::toString(shardedCost.takeError());
  ASSERT_TRUE(bool(mirroredCost)) << llvm::toString(mirroredCost.takeError());
  for (int t = 0; t < c.towers; ++t) {
    const DeviceCost *x = shardedCost->find(DeviceId::gpu(t).str());
    const DeviceCost *y = mirroredCost->find(DeviceId::gpu(t).str());
    ASSERT_TRUE(x && y);
    EXPECT_NEAR((double)(y->variableBytes - x->variableBytes),
                (double)slotBytes * (c.towers - 1) / c.towers, 4.0 * slots);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char *model : {"small_cnn", "mlp"})
    for (int towers : {2, 4})
      for (const char *optimizer : {"momentum", "adam"})
        out.push_back({model, towers, optimizer});
  out.push_back({"small_cnn", 3, "adam", 7}); // uneven batch shares and pieces
  out.push_back({"mlp", 2, "sgd"});           // no slots: still sharded updates
  out.push_back({"inception_v3", 2, "adam", 4});
  return out;
}

std::string caseName(const testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  return c.model + "_N" + std::to_string(c.towers) + "_" + c.optimizer + "_B" +
         std::to_string(c.batch);
}

INSTANTIATE_TEST_SUITE_P(Towers, ShardOptimizer, testing::ValuesIn(cases()), caseName);

/// One device with `optimizer`, plain layouts: the towers' reference.
std::map<std::string, Tensor> oneDevice(const std::string &model, const std::string &optimizer,
                                        int64_t batch) {
  auto m = buildOrFail(model, modelOptions(model));
  if (!m)
    return {};
  CompileOptions o;
  o.batch = batch;
  o.optimizer = optimizer;
  if (llvm::Error e = runPipeline(*m, kSingleDevicePipeline, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  auto ex = makeExecutor(*m, 7, true, /*blockedLayouts=*/false);
  if (!ex)
    return {};
  Batch b = randomBatch(m->main().findInput("input")->result()->type(), 10, 42);
  auto out = train(*ex, b, kSteps, kLearningRate);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return {};
  }
  return variables(*ex);
}

// Against one device in plain layouts: within the bound of the towers'
// grouping of the sums (K·u of the step's longest sum, EquivalenceTest.cpp),
// and within 1e-5. Momentum and SGD only: Adam divides each update by the
// root of its second moment, so a gradient near zero that the towers round
// otherwise moves its parameter by up to lr either way (the unsharded
// mirrored plan does the same: it has the sharded plan's bits).
TEST(ShardOptimizer, TrainsLikeOneDevice) {
  for (const char *optimizer : {"momentum", "sgd"})
    for (int towers : {2, 4}) {
      Case c{"small_cnn_nobn", towers, optimizer};
      auto want = oneDevice(c.model, optimizer, c.batch);
      ASSERT_FALSE(want.empty());
      TowerRun sharded = trainTowers(c, true, /*blockedLayouts=*/false);
      ASSERT_TRUE(sharded.executor);
      std::ostringstream what;
      PrintTo(c, &what);
      expectWithinBound(sharded.variables, want, stepBound(c.model, modelOptions(c.model), c.batch),
                        what.str());
      for (const auto &[name, value] : want)
        EXPECT_TRUE(sumbound::within(sharded.variables[name], value, 1e-5)) << what.str() << name;
    }
}

// A checkpoint of a sharded run holds whole slots: written with the pieces
// gathered, restored into either plan.
TEST(ShardOptimizer, VariablesReadAndWriteWhole) {
  Case c{"mlp", 4, "adam"};
  TowerRun sharded = trainTowers(c, true), mirrored = trainTowers(c, false);
  ASSERT_TRUE(sharded.executor && mirrored.executor);
  for (const auto &[name, value] : mirrored.variables) {
    llvm::Error e = sharded.executor->writeVariable(name, value);
    ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
    auto back = sharded.executor->readVariable(name);
    ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
    EXPECT_TRUE(sumbound::sameBits(*back, value)) << name;
  }
}

// --params other than mirrored: one message.
TEST(ShardOptimizer, NeedsMirrored) {
  for (const char *params : {"cpu", "gpu:0", "spread"}) {
    auto m = buildOrFail("mlp", {});
    ASSERT_TRUE(m);
    CompileOptions o = compileOptions({"mlp", 2, "momentum"}, true);
    o.params = cantFail(parseParamPlacement(params));
    llvm::Error e = compileTowers(*m, o);
    ASSERT_TRUE(bool(e)) << params;
    std::string msg = llvm::toString(std::move(e));
    EXPECT_NE(msg.find("--shard-optimizer shards the optimizer state of mirrored variables: it "
                       "needs --params mirrored (got --params " +
                       std::string(params) + ")"),
              std::string::npos)
        << msg;
  }
}

} // namespace
