//===- StepTimeModelTest.cpp - One time model, three analyses --------------===//
//
// The step-time model's formulas by hand, and its three users (the cost
// model, m-ETF and the event simulator) giving a node, a copy and a ring the
// model's time. A host and two GPUs at 1 TFLOP/s; the host's links 1 GB/s,
// the GPUs' link 4 GB/s.
//
//===----------------------------------------------------------------------===//

#include "placement/analysis/StepTimeModel.h"

#include "ir/Builder.h"
#include "placement/ModelParallel.h"
#include "placement/analysis/CostModel.h"
#include "placement/analysis/StepSimulator.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

constexpr double kPeak = 1e12, kHostLink = 1e9, kGpuLink = 4e9;

Cluster hostAndTwoGpus() {
  auto c = Cluster::create(
      {{"cpu:0", DeviceKind::CPU, 1LL << 30, 1.0},
       {"gpu:0", DeviceKind::GPU, 1LL << 30, 1.0},
       {"gpu:1", DeviceKind::GPU, 1LL << 30, 1.0}},
      {{"cpu:0", "gpu:0", kHostLink}, {"cpu:0", "gpu:1", kHostLink}, {"gpu:0", "gpu:1", kGpuLink}},
      kPeak, kPeak);
  EXPECT_TRUE(bool(c)) << llvm::toString(c.takeError());
  return std::move(*c);
}

/// No launches and no memory-bound time: a kernel takes its FLOPs at peak.
KernelTimes computeOnly() {
  KernelTimes t;
  t.gpuLaunchSeconds = t.cpuLaunchSeconds = 0;
  t.gpuMemoryBandwidth = t.cpuMemoryBandwidth = 1e30;
  return t;
}

/// y = MatMul(x f32[64,128], w f32[128,128]): x and w inputs. Placed: x on
/// gpu:0, w on the host and copied to gpu:0 (64 KiB). Unplaced: for m-ETF,
/// which keeps both inputs on the host and puts the product on the GPU.
struct OneProduct {
  Module m{"one_product"};
  Node *product = nullptr;
  static constexpr int64_t kCopied = 128 * 128 * 4;

  explicit OneProduct(bool placed) {
    Builder b(m.main());
    Value *x = b.input("x", TensorType(DType::F32, {64, 128}));
    Value *w = b.input("w", TensorType(DType::F32, {128, 128}));
    Value *operand = w;
    if (placed) {
      x->producer()->setAssignedDevice(DeviceId::gpu(0));
      w->producer()->setAssignedDevice(DeviceId::host());
      Node *copy = b.createNode(Op::Transfer, {w}, {}, "w/to_gpu_0");
      copy->setAssignedDevice(DeviceId::gpu(0));
      operand = copy->result();
    }
    product = b.createNode(Op::MatMul, {x, operand}, {}, "product");
    if (placed)
      product->setAssignedDevice(DeviceId::gpu(0));
    m.main().addOutput(product->result());
  }
};

/// What the three analyses make of one product with these kernel times.
struct ThreeAnswers {
  double costCompute = 0, costTraffic = 0; ///< the cost model: gpu:0, the copy
  double simCompute = 0, simComm = 0;      ///< the simulator: gpu:0's two streams
  double metfStep = 0, metfBusy = 0;       ///< m-ETF: its makespan, gpu:0's busy time
};

ThreeAnswers answer(const KernelTimes &times) {
  Cluster c = hostAndTwoGpus();
  ThreeAnswers a;
  OneProduct placed(true);
  auto cost = estimatePlacementCost(placed.m, c);
  EXPECT_TRUE(bool(cost)) << llvm::toString(cost.takeError());
  if (cost) {
    a.costCompute = cost->find("gpu:0")->computeSeconds;
    EXPECT_EQ(cost->traffic.size(), 1u);
    a.costTraffic = cost->traffic.empty() ? 0 : cost->traffic[0].seconds;
  }
  SimOptions so;
  so.times = times;
  auto sim = simulateStep(placed.m, c, so);
  EXPECT_TRUE(bool(sim)) << llvm::toString(sim.takeError());
  if (sim)
    for (const SimDevice &d : sim->devices)
      if (d.device == "gpu:0") {
        a.simCompute = d.computeSeconds;
        a.simComm = d.commSeconds;
      }
  OneProduct unplaced(false);
  ModelParallelOptions mo;
  mo.times = times;
  auto anyKernel = [](const Node &, DeviceKind) { return true; };
  auto plan = placeModelParallel(unplaced.m, c, anyKernel, mo);
  EXPECT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  if (plan) {
    EXPECT_EQ(unplaced.product->requestedDevice(), DeviceId::gpu(0));
    a.metfStep = plan->stepSeconds;
    a.metfBusy = plan->devices[1].busySeconds;
  }
  return a;
}

TEST(StepTimeModel, TheThreeAnalysesGiveANodeAndACopyTheModelsTime) {
  Cluster c = hostAndTwoGpus();
  const ClusterDevice &gpu = *c.find("gpu:0");
  OneProduct placed(true);
  const NodeCost work = nodeCost(*placed.product);
  ASSERT_EQ(work.flops, 2 * 64 * 128 * 128);

  // Without launches and memory time a kernel is its FLOPs at peak, and all
  // three agree on the node to the bit.
  StepTimeModel bare(c, computeOnly());
  const double node = bare.kernelSeconds(Op::MatMul, work, gpu);
  EXPECT_EQ(node, bare.computeSeconds(work.flops, gpu));
  EXPECT_EQ(node, 2.0 * 64 * 128 * 128 / kPeak);
  ThreeAnswers same = answer(computeOnly());
  EXPECT_EQ(same.costCompute, node);
  EXPECT_EQ(same.simCompute, node);
  EXPECT_NEAR(same.metfBusy, node, 1e-18);
  // m-ETF starts the product when its operands have arrived: the copy's time.
  EXPECT_EQ(same.metfStep, bare.copySeconds(OneProduct::kCopied, kHostLink) + node);

  // With the default launches and memory bandwidth, m-ETF and the simulator
  // time the kernel alike; the cost model stays the lower bound (FLOPs at
  // peak), as documented.
  StepTimeModel model(c);
  const double kernel = model.kernelSeconds(Op::MatMul, work, gpu);
  EXPECT_GT(kernel, node);
  ThreeAnswers full = answer(KernelTimes());
  EXPECT_EQ(full.simCompute, kernel);
  EXPECT_NEAR(full.metfBusy, kernel, 1e-18);
  EXPECT_EQ(full.metfStep, model.copySeconds(OneProduct::kCopied, kHostLink) + kernel);
  EXPECT_EQ(full.costCompute, model.computeSeconds(work.flops, gpu));
  EXPECT_LT(full.costCompute, kernel);

  // The copy: bytes / bandwidth in the cost model, plus the link's latency
  // in the simulator (and in m-ETF's arrival above).
  EXPECT_EQ(full.costTraffic, StepTimeModel::bandwidthSeconds(OneProduct::kCopied, kHostLink));
  EXPECT_EQ(full.simComm, model.copySeconds(OneProduct::kCopied, kHostLink));
  EXPECT_DOUBLE_EQ(full.simComm - full.costTraffic, KernelTimes().linkLatencySeconds);
}

TEST(StepTimeModel, ARingCostsTheSameInTheCostModelAndTheSimulator) {
  // One all-reduce of f32[256,256] (256 KiB) per GPU: 2(n-1)/n = all of it
  // each way, over the GPUs' link.
  Module m("ring");
  Builder b(m.main());
  for (int d = 0; d < 2; ++d) {
    // Names built by += (GCC 12 warns falsely on "x" + std::to_string(d)).
    const DeviceId dev = DeviceId::gpu((unsigned)d);
    std::string name = "x", sumName = "sum";
    name += std::to_string(d);
    sumName += std::to_string(d);
    Value *v = b.input(name, TensorType(DType::F32, {256, 256}));
    v->producer()->setAssignedDevice(dev);
    Attrs ar;
    ar.set("rank", int64_t(d));
    ar.set("nranks", int64_t(2));
    ar.set("group", std::string("g"));
    Node *sum = b.createNode(Op::AllReduce, {v}, ar, sumName);
    sum->setAssignedDevice(dev);
    m.main().addOutput(sum->result());
  }
  const int64_t bytes = 256 * 256 * 4;
  Cluster c = hostAndTwoGpus();
  StepTimeModel model(c);
  ASSERT_EQ(StepTimeModel::ringBytes(bytes, 2), bytes);

  auto cost = estimatePlacementCost(m, c);
  ASSERT_TRUE(bool(cost)) << llvm::toString(cost.takeError());
  EXPECT_EQ(cost->find("gpu:0")->allReduceBytes, StepTimeModel::ringBytes(bytes, 2));
  EXPECT_EQ(cost->find("gpu:0")->commSeconds, StepTimeModel::bandwidthSeconds(bytes, kGpuLink));

  auto sim = simulateStep(m, c);
  ASSERT_TRUE(bool(sim)) << llvm::toString(sim.takeError());
  EXPECT_EQ(sim->stepSeconds, model.ringSeconds(bytes, 2, kGpuLink));
  EXPECT_DOUBLE_EQ(sim->stepSeconds,
                   (double)bytes / kGpuLink + 2 * KernelTimes().linkLatencySeconds);
}

TEST(StepTimeModel, ARingRunsAtItsSlowestLinkAndNamesAMissingOne) {
  auto c = Cluster::create({{"cpu:0", DeviceKind::CPU, 1 << 20, 1},
                            {"gpu:0", DeviceKind::GPU, 1 << 20, 1},
                            {"gpu:1", DeviceKind::GPU, 1 << 20, 1},
                            {"gpu:2", DeviceKind::GPU, 1 << 20, 1}},
                           {{"gpu:0", "gpu:1", 4e9}, {"gpu:1", "cpu:0", 1e9}});
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  StepTimeModel model(*c);
  RingLinks two = model.ringLinks({"gpu:0", "gpu:1"});
  EXPECT_EQ(two.slowest, 4e9);
  EXPECT_FALSE(two.missing);
  // gpu:1 -> cpu:0 directly, cpu:0 -> gpu:0 through gpu:1 at its slower hop.
  EXPECT_EQ(model.ringLinks({"gpu:0", "gpu:1", "cpu:0"}).slowest, 1e9);
  EXPECT_EQ(model.ringLinks({"gpu:1", "gpu:1"}).slowest, 0) << "one device: no link";
  RingLinks cut = model.ringLinks({"gpu:0", "gpu:1", "gpu:2"});
  ASSERT_TRUE(cut.missing);
  EXPECT_EQ(cut.missing->first, "gpu:1");
  EXPECT_EQ(cut.missing->second, "gpu:2");
  EXPECT_EQ(cut.slowest, 4e9) << "the links there are";
  // Across workers: the same ring at the network's bandwidth and latency.
  EXPECT_DOUBLE_EQ(StepTimeModel::ringSeconds(3'000'000, 3, 1e8, 1e-5),
                   2.0 * 2 / 3 * 3'000'000 / 1e8 + 4 * 1e-5);
}

TEST(StepTimeModel, CalibratedKindsTimeKernelsByOpClass) {
  Cluster c = Cluster::defaultCluster(1);
  KindCalibration k;
  k.launchSeconds = 1e-5;
  k.convFlops = 2e10;
  k.gemmFlops = 1e10;
  k.memoryBytes = 4e9;
  c.setCalibration(DeviceKind::GPU, k);
  NodeCost cost;
  cost.flops = 4'000'000'000;
  cost.bytesRead = 800'000'000;
  const ClusterDevice &gpu = c.devices()[1], &host = c.devices()[0];
  KernelTimes t;
  StepTimeModel model(c, t);
  EXPECT_DOUBLE_EQ(model.kernelSeconds(Op::Conv, cost, gpu), 1e-5 + 0.2);
  EXPECT_DOUBLE_EQ(model.kernelSeconds(Op::MatMul, cost, gpu), 1e-5 + 0.4);
  EXPECT_DOUBLE_EQ(model.kernelSeconds(Op::Relu, cost, gpu), 1e-5 + 0.2);
  // The host is not calibrated: the larger of compute and memory time, and its dispatch.
  EXPECT_DOUBLE_EQ(model.kernelSeconds(Op::Conv, cost, host),
                   std::max(4e9 / c.peakFlops(host), 8e8 / t.cpuMemoryBandwidth) +
                       t.cpuLaunchSeconds);
  // Sources and views move nothing and cost nothing.
  EXPECT_EQ(model.kernelSeconds(Op::Reshape, NodeCost{}, gpu), 0);
}

} // namespace
