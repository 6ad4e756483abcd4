//===- InsertTransfersTest.cpp - One copy per value and destination --------===//

#include "PlacementTestUtil.h"

#include "passes/InsertTransfers.h"
#include "placement/Placer.h"

#include "ir/Printer.h"

#include <gtest/gtest.h>

#include <set>

using namespace graphc;
using namespace graphc::testing;

namespace {

void placeAndInsert(Module &m, int gpus) {
  Cluster c = Cluster::defaultCluster(gpus);
  ASSERT_EQ(errorText(Placer(c, anyKernelAnywhere).run(m)), "");
  auto changed = insertTransfers(m);
  ASSERT_TRUE(bool(changed)) << llvm::toString(changed.takeError());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(errorText(verify(m)), "");
}

std::vector<const Node *> transfers(const Module &m) {
  std::vector<const Node *> out;
  for (const Node *n : m.findGraph("main")->nodes())
    if (n->op() == Op::Transfer)
      out.push_back(n);
  return out;
}

/// Every edge either stays on one device, enters a Transfer, or touches an AllReduce.
void expectNoBareCrossings(const Module &m) {
  for (const Node *n : m.findGraph("main")->nodes())
    for (const Value *v : n->operands())
      if (v->producer()->assignedDevice() != n->assignedDevice()) {
        EXPECT_TRUE(crossesDevicesByDesign(*v, *n))
            << v->name() << " (" << deviceText(v->producer()->assignedDevice()) << ") -> "
            << n->name() << " (" << deviceText(n->assignedDevice()) << ")";
      }
}

} // namespace

TEST(InsertTransfers, OneTransferPerValueAndDestinationShared) {
  auto m = buildTowerGraph({});
  placeAndInsert(*m, 2);
  expectNoBareCrossings(*m);

  // Crossings in this graph: the weight to each GPU (read by MatMul and the
  // gradient), the split's two halves, each tower's logits and gradient back.
  std::set<std::string> names;
  for (const Node *t : transfers(*m))
    names.insert(t->name());
  EXPECT_EQ(names,
            (std::set<std::string>{"dense.weight/to_gpu_0", "dense.weight/to_gpu_1",
                                   "split_0/to_gpu_0", "split_1/to_gpu_1",
                                   "tower_0/dense/MatMul/to_cpu_0", "tower_1/dense/MatMul/to_cpu_0",
                                   "tower_0/grad/w/to_cpu_0", "tower_1/grad/w/to_cpu_0"}));

  const Node &w1 = node(*m, "dense.weight/to_gpu_1");
  EXPECT_EQ(w1.attrs().getString("from"), "cpu:0");
  EXPECT_EQ(w1.attrs().getString("to"), "gpu:1");
  EXPECT_EQ(w1.assignedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(w1.requestedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(w1.placementReason(), "transfer from cpu:0");
  EXPECT_EQ(w1.tower(), 1);
  std::set<std::string> readers;
  for (const Node *u : w1.result()->users())
    readers.insert(u->name());
  EXPECT_EQ(readers, (std::set<std::string>{"tower_1/dense/MatMul", "tower_1/grad/w"}));
  // Right after its producer, so the executor issues the copy early.
  const Node *previous = nullptr;
  for (const Node *n : m->main().nodes()) {
    if (n == &w1) {
      ASSERT_NE(previous, nullptr);
      bool producerOrSibling =
          previous == w1.operand(0)->producer() ||
          (previous->op() == Op::Transfer && previous->operand(0) == w1.operand(0));
      EXPECT_TRUE(producerOrSibling) << previous->name();
    }
    previous = n;
  }
}

TEST(InsertTransfers, IsIdempotent) {
  auto m = buildTowerGraph({});
  placeAndInsert(*m, 2);
  std::string before, after;
  llvm::raw_string_ostream a(before), b(after);
  print(*m, a);
  auto again = insertTransfers(*m);
  ASSERT_TRUE(bool(again));
  EXPECT_FALSE(*again);
  print(*m, b);
  EXPECT_EQ(a.str(), b.str());
}

TEST(InsertTransfers, AllReduceEdgesAreExempt) {
  TowerGraphOptions o;
  o.mirrored = true;
  auto m = buildTowerGraph(o);
  // Make tower 1's all-reduce read tower 0's gradient: a collective may.
  Graph &g = m->main();
  g.findNode("tower_1/allreduce")->setOperand(0, g.findValue("tower_0/grad/w"));
  placeAndInsert(*m, 2);
  expectNoBareCrossings(*m);
  for (const Node *t : transfers(*m))
    EXPECT_NE(t->operand(0)->producer()->op(), Op::AllReduce) << t->name();
  EXPECT_EQ(g.findNode("tower_1/allreduce")->operand(0)->name(), "tower_0/grad/w");
}

TEST(InsertTransfers, NeedsAssignedDevices) {
  auto m = buildTowerGraph({});
  auto r = insertTransfers(*m);
  ASSERT_FALSE(bool(r));
  EXPECT_EQ(llvm::toString(r.takeError()),
            "node 'x' (Input): has no assigned device; run place-devices before insert-transfers");
}

TEST(InsertTransfers, ValuesWithSeveralResultsGetSafeNames) {
  auto m = buildTowerGraph({});
  placeAndInsert(*m, 2);
  // SplitBatch results are "split:0", "split:1"; their transfers avoid ':'.
  for (const Node *t : transfers(*m))
    EXPECT_EQ(llvm::StringRef(t->name()).count(':'), 0u) << t->name();
}
