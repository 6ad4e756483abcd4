//===- AggregateTest.cpp - Parameter modes, balancing and buckets -----------===//

#include "TowerTestUtil.h"

#include "passes/AggregateGradients.h"
#include "passes/TowerReplication.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

std::unique_ptr<Module> compiled(const CompileOptions &o, models::ModelOptions mo = {},
                                 const char *model = "mlp") {
  if (llvm::StringRef(model) == "mlp") {
    mo.imageSize = 4;
    mo.hiddenSizes = {8, 8};
    mo.numClasses = 3;
  }
  auto m = buildOrFail(model, mo);
  if (!m)
    return nullptr;
  if (auto e = runPipeline(*m, kTowerPipeline, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  return m;
}

CompileOptions modeOf(const std::string &params, int towers = 2, int64_t batch = 4) {
  CompileOptions o;
  o.params = cantFail(parseParamPlacement(params));
  o.towers = towers;
  o.batch = batch;
  return o;
}

/// Every variable, its reads, its tower sum and its update live on `device`.
void expectAllOn(const Module &m, DeviceId device) {
  for (const Variable &v : m.variables())
    EXPECT_EQ(v.devices, std::vector<DeviceId>{device}) << v.name;
  for (const Node *n : m.findGraph("main")->nodes()) {
    bool towerSum = n->op() == Op::AddN && n->tower() < 0 && n->result()->users().size() == 1 &&
                    isVariableUpdate(n->result()->users()[0]->op());
    if (n->op() == Op::Variable || isVariableUpdate(n->op()) || towerSum) {
      EXPECT_EQ(n->requestedDevice(), device) << n->name();
    }
  }
}

TEST(Aggregate, CpuModeIsAParameterServerOnTheHost) {
  auto m = compiled(modeOf("cpu"));
  ASSERT_TRUE(m);
  expectAllOn(*m, DeviceId::host());
  for (const Node *n : m->main().nodes())
    EXPECT_NE(n->op(), Op::AllReduce);
}

TEST(Aggregate, OneGpuModeKeepsEverythingOnThatGpu) {
  auto m = compiled(modeOf("gpu:1", 3));
  ASSERT_TRUE(m);
  expectAllOn(*m, DeviceId::gpu(1));
}

TEST(Aggregate, AGpuThatIsNotThereIsAnErrorListingTheDevices) {
  auto m = buildOrFail("mlp", {});
  ASSERT_TRUE(m);
  llvm::Error e = runPipeline(*m, kTowerPipeline, modeOf("gpu:5", 4));
  ASSERT_TRUE(bool(e));
  std::string msg = llvm::toString(std::move(e));
  EXPECT_NE(msg.find("--params gpu:5 names no device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gpu:0, gpu:1, gpu:2, gpu:3"), std::string::npos) << msg;
}

TEST(Aggregate, ItNeedsTowers) {
  auto m = buildOrFail("mlp", {});
  ASSERT_TRUE(m);
  CompileOptions o = modeOf("cpu");
  ASSERT_FALSE(bool(runPipeline(*m, kSingleDevicePipeline, o)));
  auto r = aggregateGradients(*m, aggregateOptions(o));
  ASSERT_FALSE(bool(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("run replicate-towers first"), std::string::npos);
}

TEST(Aggregate, BalancingIsLargestFirstOntoTheLeastLoaded) {
  EXPECT_EQ(balanceByBytes({5, 3, 3, 2, 2, 1}, 2), (std::vector<unsigned>{0, 1, 1, 0, 1, 0}));
  EXPECT_EQ(balanceByBytes({1, 1, 1}, 4), (std::vector<unsigned>{0, 1, 2}));
  EXPECT_TRUE(balanceByBytes({}, 3).empty());
}

TEST(Aggregate, BucketsCloseBeforeTheCap) {
  EXPECT_EQ(bucketBoundaries({4, 4, 4, 10, 1, 1}, 8), (std::vector<size_t>{0, 2, 3, 4, 6}));
  EXPECT_EQ(bucketBoundaries({1, 1, 1}, 100), (std::vector<size_t>{0, 3}));
  EXPECT_EQ(bucketBoundaries({}, 8), (std::vector<size_t>{0}));
}

TEST(Aggregate, SpreadBalancesInceptionV3WithinTenPercent) {
  auto m = compiled(modeOf("spread", 4, 4), {}, "inception_v3");
  ASSERT_TRUE(m);
  std::map<DeviceId, int64_t> load;
  int64_t total = 0;
  for (const Variable &v : m->variables()) {
    ASSERT_EQ(v.devices.size(), 1u) << v.name;
    EXPECT_TRUE(v.devices[0].isGpu()) << v.name;
    load[v.devices[0]] += v.type.bytes();
    total += v.type.bytes();
  }
  ASSERT_EQ(load.size(), 4u);
  for (const auto &[device, bytes] : load) {
    double share = (double)bytes / ((double)total / 4);
    EXPECT_GT(share, 0.9) << device;
    EXPECT_LT(share, 1.1) << device;
  }
  // A variable's reads, its optimizer slot and its update stay together.
  for (const Node *n : m->main().nodes()) {
    if (n->op() == Op::Variable || isVariableUpdate(n->op())) {
      EXPECT_EQ(n->requestedDevice(), m->findVariable(n->attrs().getString("var"))->devices.front())
          << n->name();
    }
  }
}

TEST(Aggregate, MirroredReducesInBucketsAsGradientsBecomeReady) {
  CompileOptions o = modeOf("mirrored", 2);
  o.bucketBytes = 300;
  auto m = compiled(o);
  ASSERT_TRUE(m);
  const Graph &g = m->main();
  for (const Variable &v : m->variables())
    EXPECT_EQ(v.devices, (std::vector<DeviceId>{DeviceId::gpu(0), DeviceId::gpu(1)})) << v.name;

  std::vector<const Node *> order(g.nodes().begin(), g.nodes().end());
  auto position = [&](const Node *n) {
    return std::find(order.begin(), order.end(), n) - order.begin();
  };
  std::map<int, std::vector<std::string>> groups;
  std::map<int, const Node *> previous;
  for (const Node *n : order) {
    if (n->op() == Op::AddN && n->tower() < 0) {
      EXPECT_EQ(n->name(), "loss/cross_entropy") << "only the loss is summed over towers";
    }
    if (isVariableUpdate(n->op())) {
      EXPECT_EQ(n->requestedDevice(), towerDevice(n->tower())) << n->name();
      EXPECT_EQ(n->operand(0)->producer()->op(), Op::AllReduce) << n->name();
      EXPECT_EQ(n->operand(0)->producer()->tower(), n->tower()) << n->name();
    }
    if (n->op() != Op::AllReduce)
      continue;
    int t = n->tower();
    EXPECT_EQ(n->attrs().getInt("rank"), t);
    EXPECT_EQ(n->attrs().getInt("nranks"), 2);
    EXPECT_EQ(n->requestedDevice(), towerDevice(t));
    groups[t].push_back(n->attrs().getString("group"));
    int64_t bytes = 0;
    for (const Value *v : n->operands())
      bytes += v->type().bytes();
    EXPECT_TRUE(bytes <= o.bucketBytes || n->numOperands() == 1) << n->name();
    // Right after the last gradient it holds (or the tower's previous bucket).
    const Node *before = order[position(n) - 1];
    bool afterPart =
        llvm::any_of(n->operands(), [&](const Value *v) { return v->producer() == before; });
    EXPECT_TRUE(afterPart || before == previous[t]) << n->name() << " follows " << before->name();
    previous[t] = n;
  }
  ASSERT_FALSE(groups[0].empty());
  EXPECT_EQ(groups[0], groups[1]) << "every tower issues the same buckets in the same order";
  EXPECT_GT(groups[0].size(), 2u);
  // The first bucket holds the last layer's gradients.
  const Node *first = g.findNode("tower_0/allreduce/" + groups[0].front());
  ASSERT_TRUE(first);
  for (const Value *v : first->operands())
    EXPECT_TRUE(llvm::StringRef(v->name()).startswith("tower_0/grad/fc3.")) << v->name();
}

} // namespace
