//===- DevicesTest.cpp - State where it was asked for, replicas in step -----===//
//
// Runs compiled towers on emulated devices and looks at where the executor
// ended up holding variables: nowhere but the devices the parameter mode
// names (the README: variables live where --params says and nowhere else),
// and, when mirrored, the replicas agree after training.
//
//===----------------------------------------------------------------------===//

#include "TowerTestUtil.h"

#include "ir/Builder.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

std::unique_ptr<Module> compiledMlp(const std::string &params, int towers, int64_t batch) {
  models::ModelOptions mo;
  mo.imageSize = 8;
  mo.hiddenSizes = {16};
  auto m = buildOrFail("mlp", mo);
  if (!m)
    return nullptr;
  CompileOptions o;
  o.params = cantFail(parseParamPlacement(params));
  o.towers = towers;
  o.batch = batch;
  o.bucketBytes = 1024;
  if (auto e = compileTowers(*m, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  return m;
}

/// Variable bytes per executor device (emulated names: gpu:t is cpu:t+1).
std::map<std::string, int64_t> variableBytes(const Executor &ex) {
  std::map<std::string, int64_t> out;
  for (const DeviceMemory &d : ex.memory())
    out[d.device] = d.variableBytes;
  return out;
}

int64_t moduleVariableBytes(const Module &m) {
  int64_t total = 0;
  for (const Variable &v : m.variables())
    total += v.type.bytes();
  return total;
}

TEST(Devices, StateLivesOnlyWhereTheModeSaysItDoes) {
  struct Expect {
    const char *params;
    std::vector<std::string> holders; ///< executor devices that hold everything
  } cases[] = {{"cpu", {"cpu:0"}}, {"gpu:2", {"cpu:3"}}, {"mirrored", {"cpu:1", "cpu:2", "cpu:3"}}};
  for (const Expect &c : cases) {
    auto m = compiledMlp(c.params, 3, 6);
    ASSERT_TRUE(m);
    auto ex = makeExecutor(*m);
    ASSERT_TRUE(ex);
    int64_t all = moduleVariableBytes(*m);
    for (const auto &[device, bytes] : variableBytes(*ex)) {
      bool holder = llvm::is_contained(c.holders, device);
      EXPECT_EQ(bytes, holder ? all : 0) << c.params << " on " << device;
    }
  }
}

TEST(Devices, SpreadHoldsEachVariableOnce) {
  auto m = compiledMlp("spread", 3, 6);
  ASSERT_TRUE(m);
  auto ex = makeExecutor(*m);
  ASSERT_TRUE(ex);
  auto bytes = variableBytes(*ex);
  EXPECT_EQ(bytes["cpu:0"], 0) << "nothing on the host";
  int64_t sum = 0;
  for (const auto &[device, b] : bytes)
    sum += b;
  EXPECT_EQ(sum, moduleVariableBytes(*m));
}

TEST(Devices, MirroredReplicasStayEqual) {
  auto m = compiledMlp("mirrored", 3, 7);
  ASSERT_TRUE(m);
  // Return every tower's read of the weights so the replicas can be compared.
  Graph &g = m->main();
  std::vector<std::string> reads;
  for (Node *n : g.nodes())
    if (n->op() == Op::Variable && n->tower() >= 0)
      reads.push_back(n->name());
  for (const std::string &name : reads)
    g.addOutput(g.findNode(name)->result());
  auto ex = makeExecutor(*m);
  ASSERT_TRUE(ex);
  Batch b = randomBatch(g.findInput("input")->result()->type(), 10, 3);
  auto out = train(*ex, b, 3);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  size_t first = out->size() - reads.size();
  std::map<std::string, const Tensor *> byVariable;
  for (size_t i = 0; i < reads.size(); ++i) {
    const Node *n = g.findNode(reads[i]);
    std::string var = n->attrs().getString("var");
    auto [it, fresh] = byVariable.try_emplace(var, &(*out)[first + i]);
    if (!fresh) {
      EXPECT_EQ(*it->second, (*out)[first + i])
          << "replica of '" << var << "' read by " << reads[i];
    }
  }
  EXPECT_GT(byVariable.size(), 2u);
}

} // namespace
