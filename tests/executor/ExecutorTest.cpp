#include "executor/Executor.h"
#include "ir/Builder.h"
#include "ir/MemoryLimit.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

using namespace graphc;

namespace {
Attrs allReduce(const std::string &group, int rank, int nranks) {
  Attrs a;
  a.set("group", group);
  a.set("rank", (int64_t)rank);
  a.set("nranks", (int64_t)nranks);
  return a;
}
} // namespace

TEST(Executor, ConstantsVariablesAndCopiesOnOneDevice) {
  Module m;
  Variable w;
  w.name = "w";
  w.type = TensorType(DType::F32, {3});
  w.data = Tensor::fromFloats({3}, {1, 2, 3});
  m.addVariable(w);
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {3}));
  m.main().addOutput(b.create(Op::Identity, {x}));
  m.main().addOutput(b.create(Op::Identity, {b.variable("w")}));
  auto ex = Executor::create(m, {});
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  llvm::StringMap<Tensor> feeds;
  feeds["x"] = Tensor::fromFloats({3}, {7, 8, 9});
  auto out = (*ex)->run(feeds);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ((*out)[0], feeds["x"]);
  EXPECT_EQ((*out)[1], w.data);
  EXPECT_EQ((*ex)->step(), 1u);
}

TEST(Executor, BadFeedsAreNamed) {
  Module m;
  Builder b(m.main());
  m.main().addOutput(b.create(Op::Identity, {b.input("x", TensorType(DType::F32, {3}))}));
  auto ex = Executor::create(m, {});
  ASSERT_TRUE(bool(ex));
  llvm::StringMap<Tensor> none;
  auto r = (*ex)->run(none);
  ASSERT_FALSE(bool(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("'x' (f32[3]) was not fed"), std::string::npos);
  llvm::StringMap<Tensor> wrong;
  wrong["x"] = Tensor::fromFloats({2}, {1, 2});
  auto r2 = (*ex)->run(wrong);
  ASSERT_FALSE(bool(r2));
  EXPECT_NE(llvm::toString(r2.takeError()).find("expects f32[3], was fed f32[2]"),
            std::string::npos);
}

TEST(Executor, AllReduceAcrossThreeCpuDevicesWithTransfers) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {5}));
  x->producer()->setAssignedDevice(DeviceId::host());
  std::vector<Node *> reduces;
  for (int r = 0; r < 3; ++r) {
    const DeviceId dev = DeviceId::cpu((unsigned)r);
    Attrs t;
    t.set("to", dev.str());
    Node *copy = b.createNode(Op::Transfer, {x}, t, "to" + std::to_string(r));
    copy->setAssignedDevice(dev);
    Node *ar = b.createNode(Op::AllReduce, {copy->result(), copy->result()}, allReduce("g", r, 3),
                            "ar" + std::to_string(r));
    ar->setAssignedDevice(dev);
    reduces.push_back(ar);
  }
  for (Node *ar : reduces)
    m.main().addOutput(ar->result(1));
  ExecutorOptions opts;
  opts.threads = 2;
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  llvm::StringMap<Tensor> feeds;
  feeds["x"] = Tensor::fromFloats({5}, {1, 2, 3, 4, 5});
  for (int step = 0; step < 3; ++step) {
    auto out = (*ex)->run(feeds);
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    for (const Tensor &t : *out)
      for (int i = 0; i < 5; ++i)
        EXPECT_EQ(t.at(i), 3.0 * (i + 1));
  }
}

// Sharded optimizer state's collectives on the CPU engine, in uneven pieces
// (7 elements over 3 ranks: 2, 2, 3): each rank sums its piece of the
// gradient, updates its piece of its replica, and the all-gather leaves every
// replica with every updated piece.
TEST(Executor, ReduceScatterAndAllGatherInUnevenPieces) {
  Module m;
  Variable w;
  w.name = "w";
  w.type = TensorType(DType::F32, {7});
  w.data = Tensor::fromFloats({7}, {1, 2, 3, 4, 5, 6, 7});
  m.addVariable(w);
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {7}));
  Value *lr = b.input("lr", TensorType(DType::F32, {}));
  for (Value *in : {x, lr})
    in->producer()->setAssignedDevice(DeviceId::host());
  for (int r = 0; r < 3; ++r) {
    const DeviceId dev = DeviceId::cpu((unsigned)r);
    auto to = [&](Value *v, const std::string &name) {
      Attrs t;
      t.set("to", dev.str());
      Node *copy = b.createNode(Op::Transfer, {v}, t, name + std::to_string(r));
      copy->setAssignedDevice(dev);
      return copy->result();
    };
    Value *g = to(x, "x"), *rate = to(lr, "lr");
    Node *read = b.createNode(Op::Relu, {b.variable("w")}, {}, "read" + std::to_string(r));
    read->operand(0)->producer()->setAssignedDevice(dev);
    read->setAssignedDevice(dev);
    m.main().addOutput(read->result());
    Node *rs =
        b.createNode(Op::ReduceScatter, {g}, allReduce("rs", r, 3), "rs" + std::to_string(r));
    rs->setAssignedDevice(dev);
    EXPECT_EQ(rs->result()->type(), TensorType(DType::F32, {r == 2 ? 3 : 2}));
    Attrs u = allReduce("unused", r, 3);
    u.erase("group");
    u.set("var", std::string("w"));
    Node *apply = b.createNode(Op::ApplySGD, {rs->result(), rate}, u, "apply" + std::to_string(r));
    apply->setAssignedDevice(dev);
    Attrs a = allReduce("ag", r, 3);
    a.set("var", std::string("w"));
    b.createNode(Op::AllGather, {}, a, "ag" + std::to_string(r))->setAssignedDevice(dev);
  }
  ExecutorOptions opts;
  opts.threads = 2;
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  llvm::StringMap<Tensor> feeds;
  feeds["x"] = Tensor::fromFloats({7}, {1, 1, 1, 1, 1, 1, 2});
  feeds["lr"] = Tensor::scalar(0.25f);
  for (int step = 0; step < 2; ++step) {
    auto out = (*ex)->run(feeds);
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    // Each replica as the step began: w - step * 0.25 * 3x (all positive).
    for (const Tensor &t : *out)
      for (int i = 0; i < 7; ++i)
        EXPECT_EQ(t.at(i), (i + 1) - step * 0.75 * (i == 6 ? 2 : 1)) << "step " << step;
  }
}

TEST(Executor, ProfiledCpuCollectivesAreTimedAndCountAsCommunication) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {1 << 16}));
  x->producer()->setAssignedDevice(DeviceId::host());
  for (int r = 0; r < 2; ++r) {
    const DeviceId dev = DeviceId::cpu((unsigned)r);
    Node *ar = b.createNode(Op::AllReduce, {b.create(Op::Relu, {x})}, allReduce("g", r, 2),
                            "ar" + std::to_string(r));
    ar->operand(0)->producer()->setAssignedDevice(dev);
    ar->setAssignedDevice(dev);
    m.main().addOutput(ar->result());
  }
  // Relu on cpu:1 reads x from cpu:0: a transfer.
  Attrs t;
  t.set("to", std::string("cpu:1"));
  Node *copy = b.createNode(Op::Transfer, {x}, t, "to1");
  copy->setAssignedDevice(DeviceId::cpu(1));
  m.main().findNode("ar1")->operand(0)->producer()->setOperand(0, copy->result());
  ASSERT_TRUE(m.main().sortTopologically());
  ExecutorOptions opts;
  opts.threads = 2;
  opts.profile = true;
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  llvm::StringMap<Tensor> feeds;
  feeds["x"] = Tensor(TensorType(DType::F32, {1 << 16}));
  for (int step = 0; step < 2; ++step)
    ASSERT_TRUE(bool((*ex)->run(feeds)));
  int collectives = 0;
  for (const NodeProfile &p : (*ex)->profile())
    if (p.node->op() == Op::AllReduce) {
      ++collectives;
      EXPECT_EQ(p.runs, 2) << p.node->name();
      EXPECT_GT(p.seconds, 0) << p.node->name();
    }
  EXPECT_EQ(collectives, 2);
  StepBreakdown parts = (*ex)->trace().breakdown();
  ASSERT_EQ(parts.devices.size(), 2u);
  for (const auto &[device, times] : parts.devices) {
    EXPECT_GT(times[BreakdownPart::Collective], 0) << device;
    EXPECT_NEAR(times.totalUs(), parts.step.totalUs(), 1e-6 * parts.step.totalUs()) << device;
  }
}

TEST(Executor, AStuckCollectiveTimesOutNamingItself) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 3}));
  Node *ar = b.createNode(Op::AllReduce, {x}, allReduce("grads/bucket0", 0, 2), "ar0");
  m.main().addOutput(ar->result());
  ExecutorOptions opts;
  opts.waitTimeout = std::chrono::milliseconds(200);
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex));
  llvm::StringMap<Tensor> feeds;
  feeds["x"] = Tensor(TensorType(DType::F32, {2, 3}));
  auto out = (*ex)->run(feeds);
  ASSERT_FALSE(bool(out));
  std::string msg = llvm::toString(out.takeError());
  EXPECT_NE(msg.find("collective 'grads/bucket0'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("#0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ranks not arrived: 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32[2,3]"), std::string::npos) << msg;
}

TEST(Executor, GpuDevicesWithoutBackendAreRefusedWithAHint) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {2}));
  Node *n = b.createNode(Op::Identity, {x});
  n->setAssignedDevice(DeviceId::gpu(1));
  m.main().addOutput(n->result());
  auto ex = Executor::create(m, {});
  ASSERT_FALSE(bool(ex));
  EXPECT_NE(llvm::toString(ex.takeError()).find("--emulate"), std::string::npos);
  ExecutorOptions emulate;
  emulate.deviceMap = [](DeviceId d) { return d.isGpu() ? DeviceId::cpu(d.index) : d; };
  auto ok = Executor::create(m, emulate);
  ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
  EXPECT_EQ((*ok)->devices(), (std::vector<std::string>{"cpu:0", "cpu:1"}));
}

TEST(Executor, AHostThatOnlyFeedsATowerDoesNotTakeItsCores) {
  // cpu:0 holds the input, cpu:1 all the arithmetic: cpu:1 gets every thread
  // (the budget's leases keep the two within them). With two computing
  // devices the threads are shared.
  auto build = [](bool hostComputes) {
    auto m = std::make_unique<Module>();
    Builder b(m->main());
    Value *x = b.input("x", TensorType(DType::F32, {64, 64}));
    x->producer()->setAssignedDevice(DeviceId::host());
    Attrs t;
    t.set("to", std::string("cpu:1"));
    Node *copy = b.createNode(Op::Transfer, {x}, t, "to1");
    copy->setAssignedDevice(DeviceId::cpu(1));
    Value *y = b.create(Op::MatMul, {copy->result(), copy->result()});
    y->producer()->setAssignedDevice(DeviceId::cpu(1));
    m->main().addOutput(y);
    if (hostComputes) {
      Value *z = b.create(Op::MatMul, {x, x});
      z->producer()->setAssignedDevice(DeviceId::host());
      m->main().addOutput(z);
    }
    return m;
  };
  ExecutorOptions opts;
  opts.threads = 4;
  for (bool hostComputes : {false, true}) {
    auto m = build(hostComputes);
    auto ex = Executor::create(*m, opts);
    ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
    std::string threads = hostComputes ? "2 threads" : "4 threads";
    for (const std::string &d : (*ex)->deviceDescriptions())
      EXPECT_NE(d.find(threads), std::string::npos) << d;
  }
}

TEST(Executor, CpuDevicesShareScratchByTheCoresTheyHold) {
  // Four CPU devices each gather with 2^16 indices (512 KiB of scratch): the
  // scratch comes with the cores (CoreBudget.h), so there are as many buffers
  // as leases of cores can be held at once, not one per device.
  const int64_t k = 1 << 16;
  Module m;
  Builder b(m.main());
  Value *data = b.input("data", TensorType(DType::F32, {8, 4}));
  Value *idx = b.input("idx", TensorType(DType::I64, {k}));
  for (Value *v : {data, idx})
    v->producer()->setAssignedDevice(DeviceId::host());
  for (int d = 1; d <= 4; ++d) {
    Value *on[2];
    for (int i = 0; i < 2; ++i) {
      Attrs t;
      t.set("to", "cpu:" + std::to_string(d));
      Node *copy = b.createNode(Op::Transfer, {i ? idx : data}, t, "to" + std::to_string(d));
      copy->setAssignedDevice(DeviceId::cpu(d));
      on[i] = copy->result();
    }
    Attrs axis;
    axis.set("axis", (int64_t)0);
    Node *g = b.createNode(Op::Gather, {on[0], on[1]}, axis, "gather" + std::to_string(d));
    g->setAssignedDevice(DeviceId::cpu(d));
    m.main().addOutput(g->result());
  }
  std::vector<float> values(32);
  for (int i = 0; i < 32; ++i)
    values[i] = (float)i;
  Tensor indices(TensorType(DType::I64, {k}));
  for (int64_t i = 0; i < k; ++i)
    indices.data<int64_t>()[i] = (i * 7) % 8 - 4; // negatives count from the end
  llvm::StringMap<Tensor> feeds;
  feeds["data"] = Tensor::fromFloats({8, 4}, values);
  feeds["idx"] = indices;

  std::map<int, int64_t> held; // by --threads: the host bytes a bound executor holds
  std::optional<std::vector<Tensor>> first;
  for (int threads : {1, 2, 4}) {
    ExecutorOptions opts;
    opts.threads = threads;
    const int64_t before = reservedHostBytes();
    auto ex = Executor::create(m, opts);
    ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
    held[threads] = reservedHostBytes() - before;
    auto out = (*ex)->run(feeds);
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    ASSERT_EQ(out->size(), 4u);
    for (const Tensor &t : *out)
      EXPECT_EQ(t, (*out)[0]) << threads << " threads";
    if (!first)
      first = *out;
    EXPECT_EQ(*out, *first) << threads << " threads";
  }
  // One device a thread: 1, 2 and 4 leases at once.
  const int64_t buffer = held[2] - held[1];
  EXPECT_GE(buffer, k * (int64_t)sizeof(int64_t));
  EXPECT_EQ(held[4] - held[1], 3 * buffer);
}

// Emulated heterogeneity: a slower device computes the same values (its
// kernels are followed by waits, which the measured figures in
// docs/placement.md show; no test asserts a time), says so in the run plan,
// and a speed outside (0, 1] or on a GPU is refused.
TEST(Executor, AnEmulatedSlowerDeviceComputesTheSame) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {4}));
  x->producer()->setAssignedDevice(DeviceId::host());
  Attrs t;
  t.set("to", std::string("cpu:1"));
  Node *copy = b.createNode(Op::Transfer, {x}, t, "to1");
  copy->setAssignedDevice(DeviceId::cpu(1));
  Node *relu = b.create(Op::Relu, {copy->result()})->producer();
  relu->setAssignedDevice(DeviceId::cpu(1));
  m.main().addOutput(relu->result());
  llvm::StringMap<Tensor> feeds;
  feeds["x"] = Tensor::fromFloats({4}, {-1, 2, -3, 4});
  ExecutorOptions slow;
  slow.threads = 1;
  slow.relativeSpeed[DeviceId::cpu(1)] = 0.25;
  auto ex = Executor::create(m, slow);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  for (int step = 0; step < 3; ++step) {
    auto out = (*ex)->run(feeds);
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ((*out)[0], Tensor::fromFloats({4}, {0, 2, 0, 4}));
  }
  std::vector<std::string> described = (*ex)->deviceDescriptions();
  EXPECT_TRUE(
      llvm::is_contained(described, "cpu:1 (cpu, 1 thread, emulated at relative speed 0.25)"))
      << llvm::join(described, "; ");
  for (double bad : {0.0, 1.5, -1.0}) {
    ExecutorOptions wrong;
    wrong.relativeSpeed[DeviceId::cpu(1)] = bad;
    auto refused = Executor::create(m, wrong);
    ASSERT_FALSE(bool(refused)) << bad;
    EXPECT_NE(llvm::toString(refused.takeError())
                  .find("device 'cpu:1': an emulated relative speed must be in (0, 1]"),
              std::string::npos);
  }
}

// Gradient accumulation's shape: a second graph "micro" that adds its input
// into a variable, and main that reads it, adds its own and resets it. Both
// share the variable; only main advances the step.
TEST(Executor, SecondGraphSharesVariablesAndLeavesTheStep) {
  Module m;
  Variable acc;
  acc.name = "acc";
  acc.type = TensorType(DType::F32, {2});
  acc.kind = VarKind::Accumulator;
  m.addVariable(acc);
  TensorType t(DType::F32, {2});
  {
    Builder b(m.addGraph("micro"));
    Value *sum = b.create(Op::Add, {b.variable("acc"), b.input("x", t)});
    Attrs a;
    a.set("var", std::string("acc"));
    b.createNode(Op::Assign, {sum}, std::move(a), "accumulate");
  }
  {
    Builder b(m.main());
    Value *sum = b.create(Op::Add, {b.variable("acc"), b.input("x", t)});
    m.main().addOutput(sum);
    Attrs a;
    a.set("var", std::string("acc"));
    b.createNode(Op::Assign, {b.create(Op::Sub, {sum, sum})}, std::move(a), "reset");
  }
  ExecutorOptions o;
  o.graphs = {"micro"};
  auto ex = Executor::create(m, o);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  llvm::StringMap<Tensor> feeds;
  for (float v : {1.f, 2.f}) {
    feeds["x"] = Tensor::fromFloats({2}, {v, 10 * v});
    auto r = (*ex)->run("micro", feeds);
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    EXPECT_TRUE(r->empty());
  }
  EXPECT_EQ((*ex)->step(), 0u);
  feeds["x"] = Tensor::fromFloats({2}, {4, 40});
  auto out = (*ex)->run(feeds);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ((*out)[0], Tensor::fromFloats({2}, {7, 70}));
  EXPECT_EQ((*ex)->step(), 1u);
  EXPECT_EQ(*(*ex)->readVariable("acc"), Tensor::fromFloats({2}, {0, 0}));
  // Accumulators are not among the variables a checkpoint takes.
  EXPECT_TRUE((*ex)->variableNames().empty());
  auto unknown = (*ex)->run("nope", feeds);
  ASSERT_FALSE(bool(unknown));
  EXPECT_NE(llvm::toString(unknown.takeError()).find("no graph 'nope'"), std::string::npos);
}

// A second graph that would keep a variable where main keeps none is
// refused: it would update a copy main never reads.
TEST(Executor, SecondGraphMustFindVariablesWhereMainKeepsThem) {
  Module m;
  Variable acc;
  acc.name = "acc";
  acc.type = TensorType(DType::F32, {2});
  m.addVariable(acc);
  {
    Builder b(m.main());
    Node *read = b.variable("acc")->producer();
    read->setAssignedDevice(DeviceId::host());
    m.main().addOutput(read->result());
  }
  {
    Builder b(m.addGraph("micro"));
    Attrs a;
    a.set("var", std::string("acc"));
    Node *assign =
        b.createNode(Op::Assign, {b.input("x", TensorType(DType::F32, {2}))}, std::move(a), "w");
    assign->setAssignedDevice(DeviceId::cpu(1));
  }
  ExecutorOptions o;
  o.graphs = {"micro"};
  auto ex = Executor::create(m, o);
  ASSERT_FALSE(bool(ex));
  std::string msg = llvm::toString(ex.takeError());
  EXPECT_NE(msg.find("where graph 'main' keeps no copy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu:1"), std::string::npos) << msg;
}
