#include "placement/analysis/MemoryPlan.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>
#include <random>

using namespace graphc;

namespace {
/// One rank of a group of one (the collective's attributes).
Attrs allReduceAttrs() {
  Attrs a;
  a.set("group", std::string("g"));
  a.set("rank", (int64_t)0);
  a.set("nranks", (int64_t)1);
  return a;
}
} // namespace

TEST(PlanOffsets, BuffersLiveTogetherNeverOverlap) {
  std::mt19937 rng(5);
  std::vector<BufferRequest> reqs;
  for (int i = 0; i < 300; ++i) {
    unsigned a = rng() % 200, b = a + rng() % 30;
    reqs.push_back({(int64_t)(1 + rng() % 100000), a, b});
  }
  OffsetPlan p = planOffsets(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % 64, 0);
    EXPECT_LE(p.offsets[i] + reqs[i].bytes, p.arenaBytes);
    for (size_t j = i + 1; j < reqs.size(); ++j) {
      bool timeOverlap = reqs[i].first <= reqs[j].last && reqs[j].first <= reqs[i].last;
      bool spaceOverlap = p.offsets[i] < p.offsets[j] + reqs[j].bytes &&
                          p.offsets[j] < p.offsets[i] + reqs[i].bytes;
      ASSERT_FALSE(timeOverlap && spaceOverlap) << i << " and " << j;
    }
  }
  EXPECT_GE(p.arenaBytes, p.peakLiveBytes);
  EXPECT_LT(p.arenaBytes, p.naiveBytes / 3) << "liveness must let buffers share bytes";
  EXPECT_LT(p.arenaBytes, p.peakLiveBytes * 3 / 2) << "greedy-by-size stays near the bound";
}

TEST(DeviceMemoryPlan, ChainReusesAndViewsAlias) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {1024}));
  Value *v = x;
  for (int i = 0; i < 10; ++i)
    v = b.create(Op::Identity, {b.create(Op::Sigmoid, {v})});
  Attrs shape;
  shape.set("shape", Ints{32, 32});
  Value *r = b.create(Op::Reshape, {v}, shape);
  m.main().addOutput(b.create(Op::Tanh, {r}));
  auto s = buildSchedule(m.main(), [](const Node &) { return std::string("cpu:0"); });
  ASSERT_TRUE(bool(s));
  DeviceMemoryPlan p = planDeviceMemory(*s, 0, nullptr);
  EXPECT_EQ(p.offset.lookup(r), p.offset.lookup(v)) << "a reshape is a view of its operand";
  // Input (whole step) + output (whole step) + two rotating buffers.
  EXPECT_LE(p.plan.arenaBytes, 4 * 4096);
  EXPECT_GE(p.plan.naiveBytes, 12 * 4096);
}

TEST(Schedule, VariableWritersComeAfterEveryReaderOnAnyDevice) {
  Module m;
  Variable w;
  w.name = "w";
  w.type = TensorType(DType::F32, {4});
  m.addVariable(w);
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {4}));
  Value *g = b.create(Op::Sigmoid, {x}); // the "gradient", ready early
  Attrs a;
  a.set("var", std::string("w"));
  b.createNode(Op::Assign, {g}, a, "update/w");
  Value *read = b.variable("w");
  Attrs shape;
  shape.set("shape", Ints{2, 2});
  Value *view = b.create(Op::Reshape, {read}, shape);
  Value *late = b.create(Op::Tanh, {view});
  m.main().addOutput(late);
  auto s = buildSchedule(m.main(), [](const Node &n) {
    return std::string(n.op() == Op::Tanh ? "cpu:1" : "cpu:0");
  });
  ASSERT_TRUE(bool(s));
  const Node *update = m.main().findNode("update/w");
  EXPECT_GT(s->position.lookup(update), s->position.lookup(late->producer()))
      << "the reader on cpu:1, through a view, must come first";
  EXPECT_EQ(s->devices, (std::vector<std::string>{"cpu:0", "cpu:1"}));
}

TEST(DeviceMemoryPlan, InputsDefinedLateStillLiveFromTheStart) {
  // An input created after other nodes (like `lr`, added by add-optimizer)
  // is fed before the step starts: nothing may share its bytes.
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {16}));
  Value *y = b.create(Op::Sigmoid, {b.create(Op::Tanh, {x})});
  Value *lr = b.input("lr", TensorType(DType::F32, {16}));
  m.main().addOutput(b.create(Op::Add, {y, lr}));
  auto s = buildSchedule(m.main(), [](const Node &) { return std::string("cpu:0"); });
  ASSERT_TRUE(bool(s));
  DeviceMemoryPlan p = planDeviceMemory(*s, 0, nullptr);
  int64_t at = p.offset.lookup(lr);
  for (auto &[v, off] : p.offset) {
    if (v != lr) {
      EXPECT_TRUE(off + v->type().bytes() <= at || at + 64 <= off) << v->name();
    }
  }
}

TEST(ArenaParts, TheFullestMomentSplitIntoActivationsCopiesAndGaps) {
  std::mt19937 rng(7);
  DeviceMemoryPlan p;
  for (int i = 0; i < 200; ++i) {
    unsigned a = rng() % 100, b = a + rng() % 20;
    p.buffers.push_back({(int64_t)(1 + rng() % 50000), a, b});
    p.copied.push_back(rng() % 4 == 0);
  }
  p.plan = planOffsets(p.buffers);
  ArenaParts parts = arenaParts(p);
  EXPECT_EQ(parts.activations + parts.copies + parts.gaps, p.plan.arenaBytes);
  EXPECT_EQ(parts.activations + parts.copies, p.plan.peakLiveBytes);
  EXPECT_GE(parts.gaps, 0);
  // At the peak position exactly these buffers are live.
  int64_t copies = 0;
  for (size_t i = 0; i < p.buffers.size(); ++i)
    if (p.copied[i] && p.buffers[i].first <= p.plan.peakPosition &&
        p.plan.peakPosition <= p.buffers[i].last)
      copies += (p.buffers[i].bytes + 63) / 64 * 64;
  EXPECT_EQ(parts.copies, copies);
  EXPECT_GT(parts.copies, 0);
  EXPECT_GT(parts.activations, 0);
}

TEST(Schedule, ASentValueIsReleasedOnceItsCopyHasRun) {
  // cpu:0 sends `a` to cpu:1 and goes on with a chain of its own. Kept for
  // the step, `a` takes bytes of its own; released (PlanInfo::releaseSent),
  // the first kernel after the copy waits for it and may take its bytes.
  auto plan = [](bool release, bool collective) {
    auto m = std::make_unique<Module>();
    if (release)
      m->plan().releaseSent = true;
    Builder b(m->main());
    Value *x = b.input("x", TensorType(DType::F32, {1 << 16}));
    Value *a = b.create(Op::Sigmoid, {x});
    Attrs to;
    to.set("to", std::string("cpu:1"));
    Node *copy = b.createNode(Op::Transfer, {a}, to, "copy");
    m->main().addOutput(b.create(Op::Tanh, {copy->result()}));
    Value *v = b.create(Op::Tanh, {x});
    for (int i = 0; i < 4; ++i)
      v = b.create(Op::Sigmoid, {v});
    if (collective)
      v = b.createNode(Op::AllReduce, {v}, allReduceAttrs(), "sum")->result();
    m->main().addOutput(v);
    return m;
  };
  auto deviceOf = [](const Node &n) {
    bool second = n.name() == "copy" ||
                  (!n.operands().empty() && n.operand(0)->producer()->name() == "copy");
    return std::string(second ? "cpu:1" : "cpu:0");
  };
  int64_t arena[2];
  for (bool release : {false, true}) {
    auto m = plan(release, false);
    auto s = buildSchedule(m->main(), deviceOf);
    ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
    const Node *copy = m->main().findNode("copy");
    const Value *a = copy->operand(0);
    arena[release] = planDeviceMemory(*s, 0, nullptr).plan.arenaBytes;
    if (!release) {
      EXPECT_TRUE(s->releasedAt.empty());
      continue;
    }
    ASSERT_EQ(s->releasedAt.count(a), 1u);
    const Node *at = s->releasedAt.lookup(a);
    EXPECT_EQ(s->deviceOf.lookup(at), 0u);
    EXPECT_GT(s->position.lookup(at), s->position.lookup(copy));
    EXPECT_TRUE(llvm::is_contained(s->controlDeps.lookup(at), copy)) << "it waits for the copy";
    EXPECT_TRUE(llvm::is_contained(s->predecessors(at), copy));
  }
  EXPECT_LT(arena[1], arena[0]);
  // With a collective the ranks meet at their own positions: no release.
  auto m = plan(true, true);
  auto s = buildSchedule(m->main(), deviceOf);
  ASSERT_TRUE(bool(s));
  EXPECT_TRUE(s->releasedAt.empty());
}
