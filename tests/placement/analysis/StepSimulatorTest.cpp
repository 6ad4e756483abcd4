// The event simulator: hand-built plans whose step follows from the cluster's figures.

#include "placement/analysis/StepSimulator.h"

#include "ir/Builder.h"
#include "ir/Cost.h"

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

void placeAll(Module &m, DeviceId device) {
  for (Node *n : m.main().nodes())
    if (!n->assignedDevice())
      n->setAssignedDevice(device);
}

TEST(StepSimulator, AChainAcrossTwoGpusAddsItsKernelsAndTheCopy) {
  Module m("chain");
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {64, 128}));
  Value *y = b.input("y", TensorType(DType::F32, {128, 128}));
  Node *mm = b.createNode(Op::MatMul, {x, y}, {}, "mm");
  placeAll(m, DeviceId::gpu(0));
  Node *copy = b.createNode(Op::Transfer, {mm->result()}, {}, "to_gpu_1");
  Node *relu = b.createNode(Op::Relu, {copy->result()}, {}, "relu");
  copy->setAssignedDevice(DeviceId::gpu(1));
  relu->setAssignedDevice(DeviceId::gpu(1));
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

TEST(StepSimulator, AnAllReduceStartsWhenItsLastRankIsReady) {
  // gpu:0 has one matmul before its rank, gpu:1 four: both ranks start after gpu:1's.
  Module m("ring");
  Builder b(m.main());
  std::vector<Node *> ranks;
  for (int d = 0; d < 2; ++d) {
    const DeviceId dev = DeviceId::gpu((unsigned)d);
    std::string name = "x";
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

TEST(StepSimulator, EmulatedGpusTakeTurnsAtTheHostsCores) {
  // Two matmuls on each of two GPUs, independent. Calibrated as emulated on
  // the host (1 thread each): with 2 cores they run side by side, with 1 they
  // take turns; as physical GPUs they never wait for each other.
  Module m("turns");
  Builder b(m.main());
  for (int d = 0; d < 2; ++d) {
    const DeviceId dev = DeviceId::gpu((unsigned)d);
    std::string name = "x";
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

} // namespace
