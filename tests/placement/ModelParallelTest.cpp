//===- ModelParallelTest.cpp - The two list schedules on small graphs ------===//

#include "placement/ModelParallel.h"

#include "frontend/models/Models.h"
#include "ir/Builder.h"
#include "passes/Pass.h"
#include "passes/Recompute.h"
#include "placement/analysis/MemoryNeeds.h"

#include <gtest/gtest.h>

#include <set>

using namespace graphc;

namespace {

constexpr int64_t kMiB = 1 << 20;

Cluster hostAndOneGpu(int64_t gpuBytes) {
  auto c = Cluster::create({{"cpu:0", DeviceKind::CPU, 1LL << 30, 1.0},
                            {"gpu:0", DeviceKind::GPU, gpuBytes, 1.0}},
                           {{"cpu:0", "gpu:0", 1e9}}, 1e12, 1e12);
  EXPECT_TRUE(bool(c)) << llvm::toString(c.takeError());
  return std::move(*c);
}

const KernelAvailability anyKernel = [](const Node &, DeviceKind) { return true; };

/// Two branches forked from small values: each starts with an outer
/// product f32[2048,128] (1 MiB), runs kLength Relus of 1 MiB and ends in a
/// scalar ReduceMean; an Add joins the ends. The graph's order interleaves
/// the branches (a1, b1, a2, b2, ...), so one that keeps both branches
/// going holds two branches' MiB at once, one that finishes a branch first
/// holds one.
struct Fork {
  static constexpr int kLength = 6;
  Module m{"fork"};
  std::vector<Node *> a, b;

  Fork() {
    Builder bld(m.main());
    Value *col = bld.create(Op::Relu, {bld.input("col", TensorType(DType::F32, {2048, 1}))});
    Value *row = bld.create(Op::Relu, {bld.input("row", TensorType(DType::F32, {1, 128}))});
    Value *x = bld.create(Op::MatMul, {col, row}, {}, "a0");
    Value *y = bld.create(Op::MatMul, {col, row}, {}, "b0");
    a.push_back(x->producer());
    b.push_back(y->producer());
    for (int i = 1; i <= kLength; ++i) {
      x = bld.create(Op::Relu, {x}, {}, (llvm::Twine("a") + llvm::Twine(i)).str());
      y = bld.create(Op::Relu, {y}, {}, (llvm::Twine("b") + llvm::Twine(i)).str());
      a.push_back(x->producer());
      b.push_back(y->producer());
    }
    x = bld.create(Op::ReduceMean, {x}, {}, "a_end");
    y = bld.create(Op::ReduceMean, {y}, {}, "b_end");
    a.push_back(x->producer());
    b.push_back(y->producer());
    m.main().addOutput(bld.create(Op::Add, {x, y}, {}, "join"));
  }

  unsigned position(const Node *n) {
    unsigned i = 0;
    for (const Node *each : m.main().nodes()) {
      if (each == n)
        return i;
      ++i;
    }
    return i;
  }
};

ModelParallelOptions withOrder(ScheduleOrder order) {
  ModelParallelOptions o;
  o.order = order;
  return o;
}

TEST(ModelParallel, TheMemoryOrderFinishesOneBranchBeforeTheOther) {
  Fork f;
  Cluster c = hostAndOneGpu(64 * kMiB);
  auto plan = placeModelParallel(f.m, c, anyKernel, withOrder(ScheduleOrder::MemoryOrder));
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ(plan->order, ScheduleOrder::MemoryOrder);
  // The graph takes the schedule's order: one branch whole, then the other.
  bool aFirst = f.position(f.a.front()) < f.position(f.b.front());
  const std::vector<Node *> &first = aFirst ? f.a : f.b, &second = aFirst ? f.b : f.a;
  EXPECT_LT(f.position(first.back()), f.position(second.front()));
  // Two MiB live at most (a Relu's operand and result), where m-ETF's
  // interleaving holds both branches: three.
  EXPECT_LE(plan->devices[1].peakBytes, 2 * kMiB + 64 * 1024);
  Fork g;
  auto etf = placeModelParallel(g.m, c, anyKernel, withOrder(ScheduleOrder::EarliestStart));
  ASSERT_TRUE(bool(etf)) << llvm::toString(etf.takeError());
  EXPECT_GE(etf->devices[1].peakBytes, 3 * kMiB);
}

TEST(ModelParallel, AGraphThatFitsOnlyInTheMemoryOrder) {
  Cluster c = hostAndOneGpu(5 * kMiB / 2);
  Fork f;
  auto memory = placeModelParallel(f.m, c, anyKernel, withOrder(ScheduleOrder::MemoryOrder));
  ASSERT_TRUE(bool(memory)) << llvm::toString(memory.takeError());
  EXPECT_LE(memory->devices[1].peakBytes, 5 * kMiB / 2);
  for (Node *n : f.m.main().nodes())
    EXPECT_EQ(n->requestedDevice(), n->op() == Op::Input ? DeviceId::host() : DeviceId::gpu(0))
        << n->name();
  Fork g;
  auto etf = placeModelParallel(g.m, c, anyKernel, withOrder(ScheduleOrder::EarliestStart));
  ASSERT_FALSE(bool(etf));
  // The refusal is a MemoryMisfit: the device the node may use, with what
  // it would hold with the node (its results, copies of its operands) in
  // parts that add up, more than it has (it once said 0.0 MiB).
  std::unique_ptr<MemoryMisfit> misfit;
  llvm::handleAllErrors(
      etf.takeError(), [&](std::unique_ptr<MemoryMisfit> m) { misfit = std::move(m); },
      [&](const llvm::ErrorInfoBase &e) { ADD_FAILURE() << "not a misfit: " << e.message(); });
  ASSERT_TRUE(misfit);
  EXPECT_TRUE(misfit->estimated());
  const MemoryNeed *gpu = misfit->worst();
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->device, "gpu:0");
  EXPECT_EQ(gpu->capacity, 5 * kMiB / 2);
  EXPECT_GT(gpu->total(), gpu->capacity);
  EXPECT_GT(gpu->activations, 0);
  EXPECT_EQ(gpu->total(), gpu->stored() + gpu->activations + gpu->copies + gpu->gaps);
  const std::string error = misfit->message();
  EXPECT_NE(error.find("cannot be placed model-parallel: gpu:0 has no room for its results"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(gpu->text()), std::string::npos) << error;
}

/// small_cnn's training graph at batch 64 (conv+BatchNorm blocks on 28x28
/// images, the largest activations first, as in a CNN's stem).
std::unique_ptr<Module> smallCnnTraining() {
  auto m = models::buildModel("small_cnn");
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  if (!m)
    return nullptr;
  CompileOptions o;
  o.batch = 64;
  PassManager pm(o);
  if (auto e = pm.addPipeline("bind-batch,training-mode,add-loss,autodiff,add-optimizer"))
    ADD_FAILURE() << llvm::toString(std::move(e));
  if (auto e = pm.run(**m))
    ADD_FAILURE() << llvm::toString(std::move(e));
  return std::move(*m);
}

Cluster hostAndGpus(int gpus, int64_t gpuBytes) {
  std::vector<ClusterDevice> devices{{"cpu:0", DeviceKind::CPU, 1LL << 30, 1.0}};
  std::vector<Link> links;
  for (int i = 0; i < gpus; ++i) {
    std::string name = "gpu:" + std::to_string(i);
    devices.push_back({name, DeviceKind::GPU, gpuBytes, 1.0});
    links.push_back({"cpu:0", name, 1e9});
    for (int j = 0; j < i; ++j)
      links.push_back({"gpu:" + std::to_string(j), name, 1e10});
  }
  auto c = Cluster::create(devices, links, 1e12, 1e12);
  EXPECT_TRUE(bool(c)) << llvm::toString(c.takeError());
  return std::move(*c);
}

int64_t largestPeak(const ModelParallelPlan &p) {
  int64_t most = 0;
  for (const ModelParallelDevice &d : p.devices)
    if (d.device != "cpu:0")
      most = std::max(most, d.peakBytes);
  return most;
}

TEST(ModelParallel, TheSegmentedMemoryOrderCutsTheForwardPassInOnePerGpu) {
  // Each GPU could hold the whole step. The memory order fills the device
  // it is on; the segmented one spreads the forward pass over the GPUs
  // in graph order, each forward node on the GPU of its segment, and its
  // largest estimated peak is less than one device's (the first block's
  // activations, 6 MiB each, dominate, and no cut can split them).
  Cluster c = hostAndGpus(4, 1LL << 30);
  auto plain = smallCnnTraining();
  ASSERT_TRUE(plain);
  auto memory = placeModelParallel(*plain, c, anyKernel, withOrder(ScheduleOrder::MemoryOrder));
  ASSERT_TRUE(bool(memory)) << llvm::toString(memory.takeError());
  auto cut = smallCnnTraining();
  ASSERT_TRUE(cut);
  // The forward pass in graph order (the placement reorders the graph).
  const auto backward = backwardNodes(cut->main());
  std::vector<const Node *> forward;
  for (const Node *n : cut->main().nodes())
    if (!backward.contains(n) && n->op() != Op::Variable && n->op() != Op::Constant &&
        n->op() != Op::Input)
      forward.push_back(n);
  auto segmented =
      placeModelParallel(*cut, c, anyKernel, withOrder(ScheduleOrder::SegmentedMemoryOrder));
  ASSERT_TRUE(bool(segmented)) << llvm::toString(segmented.takeError());
  EXPECT_EQ(segmented->order, ScheduleOrder::SegmentedMemoryOrder);
  EXPECT_EQ(scheduleOrderName(segmented->order), "segmented memory order");

  std::set<unsigned> forwardGpus;
  unsigned last = 0;
  std::string lastName;
  for (const Node *n : forward) {
    ASSERT_TRUE(n->requestedDevice() && n->requestedDevice()->isGpu()) << n->name();
    unsigned gpu = n->requestedDevice()->index;
    EXPECT_GE(gpu, last) << n->name() << " comes after " << lastName;
    last = gpu;
    lastName = n->name();
    forwardGpus.insert(gpu);
  }
  EXPECT_GE(forwardGpus.size(), 3u);
  EXPECT_LT(largestPeak(*segmented), largestPeak(*memory) * 19 / 20)
      << largestPeak(*segmented) << " vs " << largestPeak(*memory);
}

} // namespace
