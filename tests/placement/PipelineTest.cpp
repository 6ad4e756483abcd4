//===- PipelineTest.cpp - The placer on what the tower passes produce ------===//
//
// Built-in models through the training and tower passes, then place-devices
// (the real placer, kernels everywhere) and insert-transfers, in every
// parameter mode. Checks the contract on real graphs: requests honoured,
// variables where the mode put them, every crossing through a Transfer, the
// result verifies, the same compile twice gives the same module, and the cost
// model's traffic has the shape each mode implies.
//
//===----------------------------------------------------------------------===//

#include "PlacementTestUtil.h"

#include "frontend/models/Models.h"
#include "ir/Printer.h"
#include "passes/InsertTransfers.h"
#include "passes/Pass.h"
#include "placement/Placer.h"
#include "placement/analysis/CostModel.h"

#include <gtest/gtest.h>

using namespace graphc;
using namespace graphc::testing;

namespace {

const char *const kPlacedPipeline =
    "bind-batch,training-mode,add-loss,autodiff,add-optimizer,replicate-towers,split-batch,"
    "concat-outputs,aggregate-gradients,dce,place-devices,insert-transfers,verify";

struct Compiled {
  std::unique_ptr<Module> module;
  Cluster cluster = Cluster::defaultCluster(0);
};

Compiled compile(llvm::StringRef model, int towers, const std::string &params, int64_t batch) {
  Compiled c;
  auto m = models::buildModel(model);
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  if (!m)
    return c;
  c.module = std::move(*m);
  c.cluster = Cluster::defaultCluster(towers);
  CompileOptions o;
  o.batch = batch;
  o.towers = towers;
  o.params = cantFail(parseParamPlacement(params));
  o.bucketBytes = 64 << 10; // several buckets even for small models
  o.placer = makePlacerFunction(c.cluster, anyKernelAnywhere);
  PassManager pm(o);
  if (auto e = pm.addPipeline(kPlacedPipeline))
    ADD_FAILURE() << llvm::toString(std::move(e));
  if (auto e = pm.run(*c.module))
    ADD_FAILURE() << llvm::toString(std::move(e));
  return c;
}

struct Mode {
  const char *params;
  std::vector<DeviceId> storage; ///< expected Variable::devices of every variable
};

class PlacedPipeline : public ::testing::TestWithParam<std::tuple<const char *, int>> {};

} // namespace

TEST_P(PlacedPipeline, EveryModeHonoursRequestsAndCrossesOnlyThroughTransfers) {
  auto [model, towers] = GetParam();
  std::vector<DeviceId> gpus;
  for (int t = 0; t < towers; ++t)
    gpus.push_back(DeviceId::gpu((unsigned)t));
  std::vector<Mode> modes{{"cpu", {DeviceId::host()}},
                          {"gpu:1", {DeviceId::gpu(1)}},
                          {"spread", {}},
                          {"mirrored", gpus}};
  for (const Mode &mode : modes) {
    SCOPED_TRACE(std::string(model) + ", " + std::to_string(towers) + " towers, --params " +
                 mode.params);
    Compiled c = compile(model, towers, mode.params, 8 * towers);
    ASSERT_TRUE(c.module);
    const Module &m = *c.module;
    ASSERT_EQ(errorText(verify(m)), "");
    for (const Node *n : m.findGraph("main")->nodes()) {
      ASSERT_TRUE(n->assignedDevice().has_value()) << n->name();
      if (n->requestedDevice()) {
        EXPECT_EQ(n->assignedDevice(), n->requestedDevice()) << n->name();
      }
      if (n->tower() >= 0 && !n->requestedDevice()) {
        EXPECT_EQ(n->assignedDevice(), DeviceId::gpu((unsigned)n->tower())) << n->name();
      }
      for (const Value *v : n->operands())
        if (v->producer()->assignedDevice() != n->assignedDevice()) {
          EXPECT_TRUE(crossesDevicesByDesign(*v, *n)) << v->name() << " -> " << n->name();
        }
    }
    for (const Variable &v : m.variables()) {
      if (!mode.storage.empty()) {
        EXPECT_EQ(v.devices, mode.storage) << v.name;
      } else {
        EXPECT_EQ(v.devices.size(), 1u) << v.name;
      }
    }

    auto cost = estimatePlacementCost(m, c.cluster);
    ASSERT_TRUE(bool(cost)) << llvm::toString(cost.takeError());
    int64_t variableBytes = 0;
    for (const Variable &v : m.variables())
      variableBytes += v.type.bytes();
    int64_t stored = 0;
    for (const DeviceCost &d : cost->devices)
      stored += d.variableBytes;
    if (std::string(mode.params) == "mirrored") {
      EXPECT_EQ(stored, variableBytes * towers);
      for (int t = 0; t < towers; ++t)
        EXPECT_GT(cost->devices[1 + t].allReduceBytes, 0) << t;
    } else {
      EXPECT_EQ(stored, variableBytes);
      for (const DeviceCost &d : cost->devices)
        EXPECT_EQ(d.allReduceBytes, 0);
    }
    if (std::string(mode.params) == "cpu") {
      // Every tower receives every parameter from the host.
      int64_t params = 0;
      for (const Variable &v : m.variables())
        if (v.kind == VarKind::Param)
          params += v.type.bytes();
      for (int t = 0; t < towers; ++t)
        EXPECT_GE(cost->devices[1 + t].bytesIn, params) << t;
    }
  }
}

TEST_P(PlacedPipeline, CompilingTwiceGivesTheSamePlacedModule) {
  auto [model, towers] = GetParam();
  Compiled a = compile(model, towers, "spread", 4 * towers + 1); // uneven split too
  Compiled b = compile(model, towers, "spread", 4 * towers + 1);
  ASSERT_TRUE(a.module && b.module);
  EXPECT_EQ(toText(*a.module), toText(*b.module));
}

INSTANTIATE_TEST_SUITE_P(Models, PlacedPipeline,
                         ::testing::Values(std::make_tuple("mlp", 2),
                                           std::make_tuple("small_cnn", 3)),
                         [](const auto &info) {
                           return std::string(std::get<0>(info.param)) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });
