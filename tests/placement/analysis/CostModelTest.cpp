//===- CostModelTest.cpp - Step-time figures computed by hand --------------===//
//
// A tiny placed graph on a cluster with round figures:
//   cpu:0 (CPU peak 1e9 FLOP/s), gpu:0 (GPU peak 1e10), gpu:1 (speed 0.5)
//   links: cpu:0-gpu:0 1e9 B/s, cpu:0-gpu:1 2e9, gpu:0-gpu:1 4e9
//   x f32[8,16] (512 B) and w f32[16,32] (2048 B) on cpu:0;
//   gpu:0: y0 = MatMul(x, w) (8192 FLOP), r0 = Reshape(x), AllReduce(y0) rank 0
//   gpu:1: y1 = MatMul(x, w),                               AllReduce(y1) rank 1
//   cpu:0: back = Identity(r0)
// AllReduce of 1024 B over 2 ranks adds 128 FLOP and moves 2·1/2·1024 = 1024 B
// each way at the ring's slowest link (4e9).
//
//===----------------------------------------------------------------------===//

#include "../PlacementTestUtil.h"

#include "passes/InsertTransfers.h"
#include "placement/CostReport.h"
#include "placement/analysis/CostModel.h"

#include <gtest/gtest.h>

using namespace graphc;
using namespace graphc::testing;

namespace {

Cluster handCluster() {
  auto c = parseClusterJson(R"({
    "devices": [
      {"name": "cpu:0", "kind": "cpu", "memory_bytes": 1000000, "relative_speed": 1},
      {"name": "gpu:0", "kind": "gpu", "memory_bytes": 3000, "relative_speed": 1},
      {"name": "gpu:1", "kind": "gpu", "memory_bytes": 1000000, "relative_speed": 0.5}],
    "links": [
      {"endpoints": ["cpu:0", "gpu:0"], "bandwidth": 1e9},
      {"endpoints": ["cpu:0", "gpu:1"], "bandwidth": 2e9},
      {"endpoints": ["gpu:0", "gpu:1"], "bandwidth": 4e9}],
    "peak_flops": {"cpu": 1e9, "gpu": 1e10}})");
  EXPECT_TRUE(bool(c));
  return std::move(*c);
}

std::unique_ptr<Module> handGraph() {
  auto m = std::make_unique<Module>("hand");
  Graph &g = m->main();
  Builder b(g);
  Variable w = makeVar("w", {16, 32}, VarKind::Param);
  w.devices = {DeviceId::host()};
  m->addVariable(w);
  auto on = [](Value *v, DeviceId device) {
    v->producer()->setAssignedDevice(device);
    v->producer()->setPlacementReason("by hand");
    return v;
  };
  Value *x = on(b.input("x", TensorType(DType::F32, {8, 16})), DeviceId::host());
  Value *wv = on(b.variable("w"), DeviceId::host());
  Value *y0 = on(b.create(Op::MatMul, {x, wv}, {}, "y0"), DeviceId::gpu(0));
  Attrs shape;
  shape.set("shape", Ints{128});
  Value *r0 = on(b.create(Op::Reshape, {x}, shape, "r0"), DeviceId::gpu(0));
  Value *y1 = on(b.create(Op::MatMul, {x, wv}, {}, "y1"), DeviceId::gpu(1));
  for (int rank : {0, 1}) {
    Attrs a;
    a.set("rank", int64_t(rank));
    a.set("nranks", int64_t(2));
    a.set("group", std::string("g"));
    on(b.create(Op::AllReduce, {rank ? y1 : y0}, a, "ar" + std::to_string(rank)),
       DeviceId::gpu((unsigned)rank));
  }
  g.addOutput(on(b.create(Op::Identity, {r0}, {}, "back"), DeviceId::host()));
  EXPECT_EQ(errorText(verify(*m)), "");
  return m;
}

PlacementCost estimate(const Module &m, CostOptions o = {}) {
  auto cost = estimatePlacementCost(m, handCluster(), o);
  EXPECT_TRUE(bool(cost)) << llvm::toString(cost.takeError());
  return cost ? std::move(*cost) : PlacementCost{};
}

} // namespace

TEST(CostModel, FiguresPerDeviceMatchTheHandComputation) {
  auto m = handGraph();
  PlacementCost cost = estimate(*m);
  ASSERT_EQ(cost.devices.size(), 3u);
  const DeviceCost &cpu = cost.devices[0], &g0 = cost.devices[1], &g1 = cost.devices[2];
  EXPECT_EQ(cpu.device, "cpu:0");
  EXPECT_EQ(cpu.nodes, 3);
  EXPECT_EQ(g0.nodes, 3);
  EXPECT_EQ(g1.nodes, 2);
  EXPECT_EQ(cpu.flops, 0);
  EXPECT_EQ(g0.flops, 8192 + 128);
  EXPECT_EQ(g1.flops, 8192 + 128);
  EXPECT_EQ(cpu.variableBytes, 2048);
  EXPECT_EQ(g0.variableBytes, 0);

  // x and w once per GPU (x has two readers on gpu:0), r0 back to the host.
  EXPECT_EQ(cpu.bytesOut, 2 * (512 + 2048));
  EXPECT_EQ(cpu.bytesIn, 512);
  EXPECT_EQ(g0.bytesIn, 2560 + 1024);
  EXPECT_EQ(g0.bytesOut, 512 + 1024);
  EXPECT_EQ(g1.bytesIn, 2560 + 1024);
  EXPECT_EQ(g1.bytesOut, 1024);
  EXPECT_EQ(g0.allReduceBytes, 1024);

  EXPECT_DOUBLE_EQ(cpu.computeSeconds, 0);
  EXPECT_DOUBLE_EQ(g0.computeSeconds, 8320 / 1e10);
  EXPECT_DOUBLE_EQ(g1.computeSeconds, 8320 / 0.5e10);
  EXPECT_DOUBLE_EQ(cpu.commSeconds, 2560 / 1e9 + 2560 / 2e9); // sending dominates
  EXPECT_DOUBLE_EQ(g0.commSeconds, 2560 / 1e9 + 1024 / 4e9);  // receiving dominates
  EXPECT_DOUBLE_EQ(g1.commSeconds, 2560 / 2e9 + 1024 / 4e9);
  EXPECT_DOUBLE_EQ(g0.stepSeconds, g0.commSeconds); // overlapped: the max
  EXPECT_DOUBLE_EQ(g1.stepSeconds, g1.computeSeconds);
  EXPECT_DOUBLE_EQ(cost.stepSeconds, 3.84e-6);
  EXPECT_EQ(cost.slowestDevice, "cpu:0");

  ASSERT_EQ(cost.traffic.size(), 5u);
  auto pair = [](const DeviceTraffic &t) {
    return t.from + ">" + t.to + ":" + std::to_string(t.bytes);
  };
  EXPECT_EQ(pair(cost.traffic[0]), "cpu:0>gpu:0:2560");
  EXPECT_EQ(pair(cost.traffic[1]), "cpu:0>gpu:1:2560");
  EXPECT_EQ(pair(cost.traffic[2]), "gpu:0>cpu:0:512");
  EXPECT_EQ(pair(cost.traffic[3]), "gpu:0>gpu:1:1024");
  EXPECT_EQ(pair(cost.traffic[4]), "gpu:1>gpu:0:1024");
  EXPECT_DOUBLE_EQ(cost.traffic[0].seconds, 2560 / 1e9);
  EXPECT_EQ(cost.totalTrafficBytes(), 7680);
}

TEST(CostModel, SerialCommunicationAddsUp) {
  auto m = handGraph();
  CostOptions o;
  o.overlapCommunication = false;
  PlacementCost cost = estimate(*m, o);
  EXPECT_FALSE(cost.overlap);
  EXPECT_DOUBLE_EQ(cost.devices[1].stepSeconds, 8320 / 1e10 + 2560 / 1e9 + 1024 / 4e9);
  EXPECT_DOUBLE_EQ(cost.devices[2].stepSeconds, 8320 / 0.5e10 + 2560 / 2e9 + 1024 / 4e9);
  EXPECT_EQ(cost.slowestDevice, "cpu:0");
}

TEST(CostModel, SameTrafficBeforeAndAfterInsertTransfers) {
  auto m = handGraph();
  PlacementCost before = estimate(*m);
  auto changed = insertTransfers(*m);
  ASSERT_TRUE(bool(changed) && *changed);
  PlacementCost after = estimate(*m);
  ASSERT_EQ(after.traffic.size(), before.traffic.size());
  for (size_t i = 0; i < before.traffic.size(); ++i)
    EXPECT_EQ(after.traffic[i].bytes, before.traffic[i].bytes) << i;
  EXPECT_DOUBLE_EQ(after.stepSeconds, before.stepSeconds);
  EXPECT_EQ(after.devices[1].nodes, before.devices[1].nodes + 2); // x and w arrive as Transfers
}

TEST(CostModel, ErrorsNameTheNodeOrTheDevices) {
  auto m = handGraph();
  m->main().findNode("y1")->setAssignedDevice(DeviceId::gpu(7));
  auto bad = estimatePlacementCost(*m, handCluster());
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "node 'y1' (MatMul): is assigned to 'gpu:7', which is not a device of this cluster; "
            "visible devices: cpu:0, gpu:0, gpu:1");

  auto unlinked = handGraph();
  auto c = Cluster::create({{"cpu:0", DeviceKind::CPU, 1 << 20, 1},
                            {"gpu:0", DeviceKind::GPU, 1 << 20, 1},
                            {"gpu:1", DeviceKind::GPU, 1 << 20, 1}},
                           {{"cpu:0", "gpu:0", 1e9}});
  ASSERT_TRUE(bool(c));
  auto none = estimatePlacementCost(*unlinked, *c);
  ASSERT_FALSE(bool(none));
  EXPECT_EQ(llvm::toString(none.takeError()),
            "devices cpu:0 and gpu:1 exchange data but the cluster has no link between them");
}

TEST(CostModel, ReportPrintsTheTableTrafficAndStepTime) {
  // Figures in the report's units: MiB, GFLOP, ms.
  PlacementCost big;
  big.devices = {
      {"cpu:0", 10, 2000000000, 512 << 20, 100 << 20, 200 << 20, 0, 0.002, 0.0045, 0.0045},
      {"gpu:0", 100, 340000000000, 0, 200 << 20, 100 << 20, 0, 0.005, 0.0016, 0.005}};
  big.traffic = {{"cpu:0", "gpu:0", 200 << 20, 0.0033}, {"gpu:0", "cpu:0", 100 << 20, 0.0016}};
  big.stepSeconds = 0.005;
  big.slowestDevice = "gpu:0";
  std::string s;
  llvm::raw_string_ostream os(s);
  printCostReport(big, Cluster::defaultCluster(1), os,
                  [](llvm::StringRef d) -> std::optional<int64_t> {
                    if (d == "gpu:0")
                      return 90LL << 30; // over its 80 GiB
                    return std::nullopt;
                  });
  EXPECT_EQ(os.str(),
            "per device, per step:\n"
            "device   nodes   GFLOP  var MiB  peak act MiB  in MiB  out MiB  compute ms  comm ms  "
            "step ms\n"
            "cpu:0       10    2.00    512.0             -   100.0    200.0       2.000    4.500  "
            "  4.500\n"
            "gpu:0 !    100  340.00      0.0       92160.0   200.0    100.0       5.000    1.600  "
            "  5.000\n"
            "\n"
            "traffic between devices per step:\n"
            "  from -> to        MiB     ms\n"
            "  cpu:0 -> gpu:0  200.0  3.300\n"
            "  gpu:0 -> cpu:0  100.0  1.600\n"
            "  total           300.0\n"
            "\n"
            "predicted step time: 5.000 ms on gpu:0 (compute-bound); communication overlapped "
            "with compute (max of the two)\n"
            "warning: gpu:0 needs 92160.0 MiB (variables and peak activations) but has 81920.0 "
            "MiB\n");

  auto m = handGraph();
  PlacementCost cost = estimate(*m);
  llvm::json::Value j = costReportJson(cost, handCluster());
  const llvm::json::Object *o = j.getAsObject();
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(*o->getInteger("total_traffic_bytes"), 7680);
  EXPECT_EQ(*o->getString("slowest_device"), "cpu:0");
  const llvm::json::Object *g1 = (*o->getArray("devices"))[2].getAsObject();
  EXPECT_EQ(*g1->getString("device"), "gpu:1");
  EXPECT_EQ(*g1->getInteger("flops"), 8320);
  EXPECT_EQ(*g1->getInteger("bytes_in"), 3584);
  EXPECT_TRUE(g1->get("peak_activation_bytes")->getAsNull().hasValue());
  EXPECT_DOUBLE_EQ(*g1->getNumber("compute_seconds"), 8320 / 0.5e10);
}
