//===- FusedUpdatesTest.cpp - Multi-tensor optimizer updates ----------------===//
//
// ExecutorOptions::fuseUpdates: each device runs its adjacent updates of one
// rule as one launch (Kernel::runGroup). Training with and without it must
// give bit-identical variables and optimizer slots, for every rule, on one
// device and on two mirrored towers; the groups hold every update.
//
//===----------------------------------------------------------------------===//

#include "tests/towers/TowerTestUtil.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

std::unique_ptr<Module> compiledFor(llvm::StringRef optimizer, int towers) {
  auto m = buildOrFail("small_cnn", {});
  if (!m)
    return nullptr;
  CompileOptions o;
  o.batch = 8;
  o.towers = towers;
  o.optimizer = optimizer.str();
  if (auto e = towers > 1 ? compileTowers(*m, o) : runPipeline(*m, kSingleDevicePipeline, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  if (towers == 1)
    assignRequested(*m);
  return m;
}

TEST(FusedUpdates, EveryRuleTrainsBitForBitAsOneLaunchPerNode) {
  for (const char *optimizer : {"sgd", "momentum", "rmsprop", "adam"}) {
    for (int towers : {1, 2}) {
      SCOPED_TRACE(std::string(optimizer) + ", towers " + std::to_string(towers));
      auto m = compiledFor(optimizer, towers);
      ASSERT_TRUE(m);
      auto fused = makeExecutor(*m, 7, true), single = makeExecutor(*m, 7, false);
      ASSERT_TRUE(fused && single);
      // Every update is in a group, of one device each.
      int updates = 0, grouped = 0;
      for (const Node *n : m->main().nodes())
        updates += isApplyRule(n->op());
      for (const FusedGroup &g : fused->fusedGroups()) {
        grouped += (int)g.nodes.size();
        for (const Node *n : g.nodes) {
          EXPECT_TRUE(isApplyRule(n->op())) << n->name();
          EXPECT_EQ(n->op(), g.nodes.front()->op()) << n->name();
          EXPECT_EQ(emulate(n->assignedDevice().value_or(DeviceId::host())).str(), g.device)
              << n->name();
        }
      }
      EXPECT_EQ(grouped, updates);
      EXPECT_TRUE(single->fusedGroups().empty());
      Batch b = randomBatch(TensorType(DType::F32, {8, 1, 28, 28}), 10, 3);
      ASSERT_TRUE(bool(train(*fused, b, 3, 0.05f)));
      ASSERT_TRUE(bool(train(*single, b, 3, 0.05f)));
      auto got = variables(*fused), want = variables(*single);
      ASSERT_EQ(got.size(), want.size());
      for (const auto &[name, value] : want) {
        ASSERT_TRUE(got.count(name)) << name;
        ASSERT_EQ(got[name].bytes(), value.bytes()) << name;
        EXPECT_EQ(std::memcmp(got[name].raw(), value.raw(), value.bytes()), 0) << name;
      }
    }
  }
}

} // namespace
