// graphc simulate's event simulation: hand-built plans whose step follows from the cluster's
// figures, and a compiled data-parallel plan checked against the cost model's lower bound.

#include "tools/driver/Simulate.h"

#include "tools/driver/Calibrate.h"
#include "tools/driver/Trainer.h"

#include "frontend/models/Models.h"
#include "ir/Builder.h"
#include "ir/Cost.h"
#include "passes/strategy/CompileStrategy.h"
#include "passes/strategy/CompiledModule.h"
#include "placement/CostModel.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

constexpr double kPeak = 1e12, kLink = 1e9;

/// A host and two GPUs of 1 TFLOP/s, 16 GiB, linked at 1 GB/s.
Cluster twoGpus() {
  std::vector<ClusterDevice> devices{{"cpu:0", DeviceKind::CPU, 64LL << 30, 1.0},
                                     {"gpu:0", DeviceKind::GPU, 16LL << 30, 1.0},
                                     {"gpu:1", DeviceKind::GPU, 16LL << 30, 1.0}};
  std::vector<Link> links{
      {"cpu:0", "gpu:0", kLink}, {"cpu:0", "gpu:1", kLink}, {"gpu:0", "gpu:1", kLink}};
  auto c = Cluster::create(devices, links, kPeak, kPeak);
  EXPECT_TRUE(bool(c)) << llvm::toString(c.takeError());
  return std::move(*c);
}

/// Compute-bound kernels: memory bandwidth out of the way.
SimOptions computeBound() {
  SimOptions o;
  o.times.gpuMemoryBandwidth = o.times.cpuMemoryBandwidth = 1e30;
  return o;
}

void placeAll(Module &m, llvm::StringRef device) {
  for (Node *n : m.main().nodes())
    if (n->assignedDevice().empty())
      n->setAssignedDevice(device.str());
}

TEST(Simulate, AChainAcrossTwoGpusAddsItsKernelsAndTheCopy) {
  Module m("chain");
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {64, 128}));
  Value *y = b.input("y", TensorType(DType::F32, {128, 128}));
  Node *mm = b.createNode(Op::MatMul, {x, y}, {}, "mm");
  placeAll(m, "gpu:0");
  Node *copy = b.createNode(Op::Transfer, {mm->result()}, {}, "to_gpu_1");
  Node *relu = b.createNode(Op::Relu, {copy->result()}, {}, "relu");
  copy->setAssignedDevice("gpu:1");
  relu->setAssignedDevice("gpu:1");
  m.main().addOutput(relu->result());

  SimOptions o = computeBound();
  auto r = simulateStep(m, twoGpus(), o);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  double matmul = 2.0 * 64 * 128 * 128 / kPeak + o.times.gpuLaunchSeconds;
  double transfer = 64.0 * 128 * 4 / kLink + o.times.linkLatencySeconds;
  double reluTime = (double)nodeCost(*relu).flops / kPeak + o.times.gpuLaunchSeconds;
  EXPECT_NEAR(r->stepSeconds, matmul + transfer + reluTime, 1e-12);
  ASSERT_EQ(r->criticalPath.size(), 3u);
  EXPECT_EQ(r->criticalPath[0].node, mm);
  EXPECT_EQ(r->criticalPath[1].kind, "transfer");
  EXPECT_EQ(r->criticalPath[2].node, relu);
  ASSERT_EQ(r->devices.size(), 2u);
  EXPECT_EQ(r->devices[0].device, "gpu:0");
  EXPECT_NEAR(r->devices[0].computeSeconds, matmul, 1e-12);
  EXPECT_EQ(r->devices[1].copies, 1);
  EXPECT_NEAR(r->devices[1].commSeconds, transfer, 1e-12);
  EXPECT_NEAR(r->devices[1].idleSeconds(r->stepSeconds), matmul + transfer, 1e-12);
}

TEST(Simulate, AnAllReduceStartsWhenItsLastRankIsReady) {
  // gpu:0 has one matmul before its rank, gpu:1 four: both ranks start after gpu:1's.
  Module m("ring");
  Builder b(m.main());
  std::vector<Node *> ranks;
  for (int d = 0; d < 2; ++d) {
    std::string dev = DeviceId::gpu(d).str(), name = "x";
    name += std::to_string(d);
    Value *v = b.input(name, TensorType(DType::F32, {256, 256}));
    v->producer()->setAssignedDevice(dev);
    for (int k = 0; k < (d == 0 ? 1 : 4); ++k) {
      Node *mm = b.createNode(Op::MatMul, {v, v});
      mm->setAssignedDevice(dev);
      v = mm->result();
    }
    Attrs ar;
    ar.set("rank", int64_t(d));
    ar.set("nranks", int64_t(2));
    ar.set("group", std::string("g"));
    Node *sum = b.createNode(Op::AllReduce, {v}, ar, name + "_sum");
    sum->setAssignedDevice(dev);
    m.main().addOutput(sum->result());
    ranks.push_back(sum);
  }
  SimOptions o = computeBound();
  auto r = simulateStep(m, twoGpus(), o);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  double matmul = 2.0 * 256 * 256 * 256 / kPeak + o.times.gpuLaunchSeconds;
  double ring = 2.0 * 1 / 2 * (256 * 256 * 4) / kLink + 2 * o.times.linkLatencySeconds;
  EXPECT_NEAR(r->stepSeconds, 4 * matmul + ring, 1e-12);
  EXPECT_NEAR(r->devices[0].idleSeconds(r->stepSeconds), 3 * matmul + ring, 1e-12);
  // The path runs through gpu:1's four matmuls, then the collective.
  ASSERT_EQ(r->criticalPath.size(), 5u);
  EXPECT_EQ(r->criticalPath.back().kind, "all-reduce");
  EXPECT_EQ(r->criticalPath.front().device, "gpu:1");
  // As one worker of three, the sum also goes round the workers at the network's bandwidth.
  o.workers = 3;
  o.networkBandwidth = 1e8;
  auto across = simulateStep(m, twoGpus(), o);
  ASSERT_TRUE(bool(across)) << llvm::toString(across.takeError());
  double workers = 2.0 * 2 / 3 * (256 * 256 * 4) / 1e8 + 4 * o.networkLatencySeconds;
  EXPECT_NEAR(across->stepSeconds, 4 * matmul + ring + workers, 1e-12);
}

TEST(Simulate, EmulatedGpusTakeTurnsAtTheHostsCores) {
  // Two matmuls on each of two GPUs, independent. Calibrated as emulated on
  // the host (1 thread each): with 2 cores they run side by side, with 1 they
  // take turns; as physical GPUs they never wait for each other.
  Module m("turns");
  Builder b(m.main());
  for (int d = 0; d < 2; ++d) {
    std::string dev = DeviceId::gpu(d).str(), name = "x";
    name += std::to_string(d);
    Value *v = b.input(name, TensorType(DType::F32, {256, 256}));
    v->producer()->setAssignedDevice(dev);
    for (int k = 0; k < 2; ++k) {
      Node *mm = b.createNode(Op::MatMul, {v, v});
      mm->setAssignedDevice(dev);
      v = mm->result();
    }
    m.main().addOutput(v);
  }
  const double rate = 1e10, matmul = 2.0 * 256 * 256 * 256 / rate;
  auto step = [&](unsigned threads, unsigned cores) {
    Cluster c = twoGpus();
    KindCalibration k;
    k.convFlops = k.gemmFlops = rate;
    k.memoryBytes = 1e12;
    k.threads = threads;
    k.cores = cores;
    c.setCalibration(DeviceKind::GPU, k);
    auto r = simulateStep(m, c, computeBound());
    EXPECT_TRUE(bool(r)) << llvm::toString(r.takeError());
    return r ? r->stepSeconds : 0.0;
  };
  EXPECT_NEAR(step(0, 0), 2 * matmul, 1e-12); // devices of their own
  EXPECT_NEAR(step(1, 2), 2 * matmul, 1e-12);
  EXPECT_NEAR(step(1, 1), 4 * matmul, 1e-12);
  // Calibrated with 1 thread on 4 cores, each of the two devices runs with 2.
  EXPECT_NEAR(step(1, 4), matmul, 1e-12);
}

TEST(Simulate, ACompiledMirroredPlanIsNoFasterThanTheCostModelsBound) {
  auto forward = models::buildModel("small_cnn");
  ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
  CompileRequest req;
  req.options.batch = 64;
  req.options.params = ParamPlacement{ParamPlacement::Mirrored};
  PlacementRequest place;
  place.gpus = 4;
  auto plan = compilePlan(**forward, req, place);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  std::unique_ptr<Module> runnable = runnablePart(**plan);
  Cluster cluster = Cluster::defaultCluster(4);
  auto r = simulateStep(*runnable, cluster);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  auto bound = estimatePlacementCost(*runnable, cluster);
  ASSERT_TRUE(bool(bound)) << llvm::toString(bound.takeError());
  EXPECT_GE(r->stepSeconds, bound->stepSeconds);
  ASSERT_EQ(r->devices.size(), 5u);
  for (const SimDevice &d : r->devices) {
    EXPECT_LE(d.computeSeconds, r->stepSeconds) << d.device;
    if (d.device != "cpu:0") {
      EXPECT_GT(d.copies, 0) << d.device << " takes part in the all-reduce";
    }
  }
  // The critical path is contiguous: each node starts as the one that held it back ends.
  ASSERT_FALSE(r->criticalPath.empty());
  EXPECT_EQ(r->criticalPath.front().start, 0.0);
  for (size_t i = 1; i < r->criticalPath.size(); ++i)
    EXPECT_NEAR(r->criticalPath[i].start, r->criticalPath[i - 1].end, 1e-12) << i;
  EXPECT_NEAR(r->criticalPath.back().end, r->stepSeconds, 1e-12);
}

TEST(Calibrate, FitsLaunchAndRatesPerOpClass) {
  // Tiny kernels take 3 us each (the launch); the rest add their work at known rates.
  std::vector<KernelTiming> k{
      {Op::Relu, "cpu:1", 100, 1000, 3 * 3e-6, 3},
      {Op::Add, "cpu:1", 10, 64, 2 * 3e-6, 2},
      {Op::Reshape, "cpu:1", 0, 0, 3e-6, 1},
      {Op::Conv, "cpu:1", 2'000'000'000, 1, 2 * (3e-6 + 0.02), 2},   // 1e11 FLOP/s
      {Op::MatMul, "cpu:1", 100'000'000, 1, 3e-6 + 0.01, 1},         // 1e10 FLOP/s
      {Op::BatchNormTrain, "cpu:1", 1, 400'000'000, 3e-6 + 0.1, 1}}; // 4e9 B/s
  KindCalibration c = fitCalibration(k, "synthetic");
  EXPECT_NEAR(c.launchSeconds, 3e-6, 1e-12);
  EXPECT_NEAR(c.convFlops, 1e11, 1e11 * 1e-9);
  EXPECT_NEAR(c.gemmFlops, 1e10, 1e10 * 1e-9);
  // The memory class also holds the tiny kernels' bytes, with no time left after launches.
  EXPECT_NEAR(c.memoryBytes, (400'000'000 + 3 * 1000 + 2 * 64) / 0.1, 1e3);
  EXPECT_TRUE(c.present());
  EXPECT_EQ(c.measured, "synthetic");
}

} // namespace
