//===- PlacerTest.cpp - The placer's contract, one constraint at a time ----===//

#include "PlacementTestUtil.h"

#include "passes/PlaceDevices.h"
#include "placement/ColocationGroups.h"
#include "placement/Placer.h"

#include "ir/Printer.h"

#include <gtest/gtest.h>

using namespace graphc;
using namespace graphc::testing;

namespace {

llvm::Error place(Module &m, int gpus, KernelAvailability k = anyKernelAnywhere,
                  PlacerOptions o = {}) {
  Cluster c = Cluster::defaultCluster(gpus);
  return Placer(c, std::move(k), o).run(m);
}

/// Kernels everywhere except `op`, which has no GPU kernel.
KernelAvailability noGpuKernelFor(Op op) {
  return [op](const Node &n, DeviceKind t) { return !(n.op() == op && t == DeviceKind::GPU); };
}

std::string placementOf(const Module &m) {
  std::string s;
  for (const Node *n : m.findGraph("main")->nodes())
    s += n->name() + " -> " + deviceText(n->assignedDevice()) + " (" + n->placementReason() + ")\n";
  return s;
}

} // namespace

TEST(Placer, HonoursRequestsAndGivesEveryNodeADeviceAndReason) {
  auto m = buildTowerGraph({});
  ASSERT_EQ(errorText(place(*m, 2)), "");
  for (const Node *n : m->main().nodes()) {
    EXPECT_TRUE(n->assignedDevice().has_value()) << n->name();
    EXPECT_FALSE(n->placementReason().empty()) << n->name();
    if (n->requestedDevice()) {
      EXPECT_EQ(n->assignedDevice(), n->requestedDevice()) << n->name();
      EXPECT_EQ(n->placementReason(), "requested") << n->name();
    }
  }
  EXPECT_EQ(node(*m, "tower_1/dense/MatMul").assignedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(node(*m, "dense.weight").assignedDevice(), DeviceId::host());
  EXPECT_EQ(node(*m, "update/dense.weight").assignedDevice(), DeviceId::host());
  EXPECT_EQ(errorText(checkPlaced(*m)), "");
}

TEST(Placer, NodesWithOnlyATowerFollowTheirTowersDevice) {
  TowerGraphOptions o;
  o.requestTowerNodes = false;
  auto m = buildTowerGraph(o);
  ASSERT_EQ(errorText(place(*m, 2)), "");
  const Node &relu = node(*m, "tower_1/dense/Relu");
  EXPECT_EQ(relu.assignedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(relu.placementReason(), "tower 1");
}

TEST(Placer, TowerDeviceIsTheOneItsNodesRequestMost) {
  // Tower 0's nodes request gpu:1 (a remapped tower); its unrequested nodes go along.
  auto m = buildTowerGraph({});
  for (Node *n : m->main().nodes())
    if (n->tower() == 0 && n->name() != "tower_0/dense/Relu")
      n->setRequestedDevice(DeviceId::gpu(1));
  m->main().findNode("tower_0/dense/Relu")->setRequestedDevice(std::nullopt);
  ASSERT_EQ(errorText(place(*m, 2)), "");
  EXPECT_EQ(node(*m, "tower_0/dense/Relu").assignedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(node(*m, "tower_0/dense/Relu").placementReason(), "tower 0");
}

TEST(Placer, UpdatesAndReadsOfAVariableStayTogether) {
  auto m = buildTowerGraph({});
  // Only the read asks; the update must follow it, and says why.
  m->main().findNode("update/dense.weight")->setRequestedDevice(std::nullopt);
  m->main().findNode("grad/dense.weight")->setRequestedDevice(std::nullopt);
  ASSERT_EQ(errorText(place(*m, 2)), "");
  const Node &update = node(*m, "update/dense.weight");
  EXPECT_EQ(update.assignedDevice(), DeviceId::host());
  EXPECT_EQ(update.placementReason(), "colocated with 'dense.weight' (Variable)");
  // Storage and the optimizer slot are recorded where the group went.
  EXPECT_EQ(m->findVariable("dense.weight")->devices, std::vector<DeviceId>{DeviceId::host()});
  EXPECT_EQ(m->findVariable("dense.weight.momentum")->devices, std::vector<DeviceId>{DeviceId::host()});
}

TEST(Placer, VariableStorageIsARequest) {
  auto m = buildTowerGraph({});
  m->findVariable("dense.weight")->devices = {DeviceId::gpu(1)};
  for (const char *name : {"dense.weight", "update/dense.weight", "grad/dense.weight"})
    m->main().findNode(name)->setRequestedDevice(std::nullopt);
  ASSERT_EQ(errorText(place(*m, 2)), "");
  EXPECT_EQ(node(*m, "dense.weight").assignedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(node(*m, "dense.weight").placementReason(),
            "colocated with the storage of variable 'dense.weight'");
  EXPECT_EQ(node(*m, "update/dense.weight").assignedDevice(), DeviceId::gpu(1));
}

TEST(Placer, ColocateWithAttributeJoinsTheNamedNode) {
  auto m = buildTowerGraph({});
  Node *relu = m->main().findNode("tower_1/dense/Relu");
  relu->setRequestedDevice(std::nullopt);
  relu->setTower(-1);
  relu->attrs().set("colocate_with", std::string("tower_0/dense/MatMul"));
  ASSERT_EQ(errorText(place(*m, 2)), "");
  EXPECT_EQ(relu->assignedDevice(), DeviceId::gpu(0));
  EXPECT_EQ(relu->placementReason(), "colocated with 'tower_0/dense/MatMul' (MatMul)");
}

TEST(Placer, ColocateWithAnUnknownNodeIsAnError) {
  auto m = buildTowerGraph({});
  m->main().findNode("tower_1/dense/Relu")->attrs().set("colocate_with", std::string("nope"));
  EXPECT_EQ(errorText(place(*m, 2)),
            "node 'tower_1/dense/Relu' (Relu): colocate_with names 'nope', which is not a node of "
            "graph 'main'");
}

TEST(Placer, ConflictingRequestsInAGroupNameBothNodes) {
  auto m = buildTowerGraph({});
  m->main().findNode("update/dense.weight")->setRequestedDevice(DeviceId::gpu(1));
  std::string msg = errorText(place(*m, 2));
  EXPECT_EQ(msg, "Cannot assign a device for operation 'update/dense.weight' (ApplyMomentum): it "
                 "requested 'gpu:1', but it must be colocated with 'dense.weight' (Variable), "
                 "which requested 'cpu:0'; colocated because 'dense.weight' reads or writes "
                 "variable 'dense.weight', 'update/dense.weight' reads or writes variable "
                 "'dense.weight', 'update/dense.weight' updates optimizer slot "
                 "'dense.weight.momentum'");
}

TEST(Placer, RequestConflictingWithStorageIsAnError) {
  auto m = buildTowerGraph({});
  m->findVariable("dense.weight.momentum")->devices = {DeviceId::gpu(0)};
  std::string msg = errorText(place(*m, 2));
  EXPECT_NE(msg.find("Cannot assign a device for operation 'dense.weight' (Variable): the storage "
                     "of variable 'dense.weight.momentum' is on 'gpu:0', but it must be colocated "
                     "with 'dense.weight' (Variable), which requested 'cpu:0'"),
            std::string::npos)
      << msg;
}

TEST(Placer, RequestForAMissingDeviceListsTheVisibleOnes) {
  auto m = buildTowerGraph({});
  m->main().findNode("tower_1/dense/Relu")->setRequestedDevice(DeviceId::gpu(5));
  EXPECT_EQ(errorText(place(*m, 2)),
            "Cannot assign a device for operation 'tower_1/dense/Relu' (Relu): requested device "
            "'gpu:5' is not a device of this cluster; visible devices: cpu:0, gpu:0, gpu:1");
}

TEST(Placer, OpWithoutGpuKernelFallsBackToTheHostWithThatReason) {
  auto m = buildTowerGraph({});
  ASSERT_EQ(errorText(place(*m, 2, noGpuKernelFor(Op::Relu))), "");
  const Node &relu = node(*m, "tower_1/dense/Relu");
  EXPECT_EQ(relu.assignedDevice(), DeviceId::host());
  EXPECT_EQ(relu.placementReason(), "requested gpu:1, but no gpu kernel for Relu: cpu:0");
  EXPECT_EQ(node(*m, "tower_1/dense/MatMul").assignedDevice(), DeviceId::gpu(1));
}

TEST(Placer, PinnedOpWithoutKernelIsAnErrorWithoutSoftPlacement) {
  auto m = buildTowerGraph({});
  PlacerOptions hard;
  hard.softPlacement = false;
  EXPECT_EQ(errorText(place(*m, 2, noGpuKernelFor(Op::Relu), hard)),
            "Cannot assign a device for operation 'tower_0/dense/Relu' (Relu): it is requested on "
            "'gpu:0' but has no gpu kernel; devices that could run it: cpu:0 (soft placement is "
            "off)");
}

TEST(Placer, GroupFallsBackTogetherAndNamesTheMemberWithoutKernel) {
  auto m = buildTowerGraph({});
  m->findVariable("dense.weight")->devices = {DeviceId::gpu(0)};
  for (const char *name : {"dense.weight", "update/dense.weight", "grad/dense.weight"})
    m->main().findNode(name)->setRequestedDevice(DeviceId::gpu(0));
  ASSERT_EQ(errorText(place(*m, 2, noGpuKernelFor(Op::ApplyMomentum))), "");
  EXPECT_EQ(node(*m, "dense.weight").assignedDevice(), DeviceId::host());
  EXPECT_EQ(node(*m, "dense.weight").placementReason(),
            "requested gpu:0, but no gpu kernel for 'update/dense.weight' (ApplyMomentum): cpu:0");
  EXPECT_EQ(m->findVariable("dense.weight")->devices, std::vector<DeviceId>{DeviceId::host()});
  EXPECT_EQ(node(*m, "grad/dense.weight").assignedDevice(), DeviceId::gpu(0));
}

TEST(Placer, OpWithNoKernelAnywhereIsAnError) {
  auto m = buildTowerGraph({});
  auto none = [](const Node &n, DeviceKind) { return n.op() != Op::Relu; };
  EXPECT_EQ(errorText(place(*m, 2, none)),
            "Cannot assign a device for operation 'tower_0/dense/Relu' (Relu): no device kind has "
            "a kernel for it (cpu, gpu: none); visible devices: cpu:0, gpu:0, gpu:1");
}

TEST(Placer, GroupThatNoKindCanRunIsAnError) {
  auto m = buildTowerGraph({});
  Node *relu = m->main().findNode("tower_0/dense/Relu");
  relu->attrs().set("colocate_with", std::string("tower_0/dense/MatMul"));
  auto k = [](const Node &n, DeviceKind t) {
    if (n.op() == Op::Relu)
      return t == DeviceKind::CPU;
    if (n.op() == Op::MatMul)
      return t == DeviceKind::GPU;
    return true;
  };
  EXPECT_EQ(errorText(place(*m, 2, k)),
            "Cannot assign a device for operation 'tower_0/dense/Relu' (Relu): no device kind can "
            "run every member of its colocation group: 'tower_0/dense/MatMul' (MatMul) runs on "
            "gpu; 'tower_0/dense/Relu' (Relu) runs on cpu; colocated because "
            "'tower_0/dense/Relu' colocate_with 'tower_0/dense/MatMul'");
}

TEST(Placer, NodesWithoutRequestOrTowerFollowTheirNeighbours) {
  auto m = buildTowerGraph({});
  Graph &g = m->main();
  // Inputs are fed on the host; a constant follows its consumer.
  Builder b(g);
  b.setTower(-1);
  Node *update = g.findNode("update/dense.weight");
  update->setOperand(1, b.create(Op::Mul, {update->operand(1), b.scalar(2.0f, "two")}, {}, "lr2"));
  update->setRequestedDevice(DeviceId::gpu(1));
  m->findVariable("dense.weight")->devices = {DeviceId::gpu(1)};
  for (const char *name : {"dense.weight", "grad/dense.weight"})
    g.findNode(name)->setRequestedDevice(DeviceId::gpu(1));
  ASSERT_EQ(errorText(place(*m, 2)), "");
  EXPECT_EQ(node(*m, "lr").assignedDevice(), DeviceId::host());
  EXPECT_EQ(node(*m, "lr").placementReason(), "an input: fed on the host");
  EXPECT_EQ(node(*m, "x").placementReason(), "an input: fed on the host");
  EXPECT_EQ(node(*m, "lr2").placementReason(), "follows its input 'lr' (cpu:0)");
  EXPECT_EQ(node(*m, "two").placementReason(), "follows its consumer 'lr2' (cpu:0)");
  Node *scaled = b.createNode(Op::Mul, {g.findValue("tower_1/dense/Relu"), b.scalar(3.0f, "three")},
                              {}, "scaled");
  scaled->setRequestedDevice(DeviceId::gpu(1));
  ASSERT_EQ(errorText(place(*m, 2)), "");
  EXPECT_EQ(node(*m, "three").assignedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(node(*m, "three").placementReason(), "follows its consumer 'scaled' (gpu:1)");

  // A free node reading 48 bytes from gpu:1 and 4 from cpu:0 goes to gpu:1.
  Value *big = g.findValue("tower_1/dense/MatMul"); // [4,3] f32: 48 bytes
  Value *small = b.input("small", TensorType(DType::F32, {2}));
  small->producer()->setRequestedDevice(DeviceId::host());
  Value *sum = b.create(Op::Add,
                        {big, b.create(Op::Reshape, {b.create(Op::ReduceSum, {small})},
                                       [] {
                                         Attrs a;
                                         a.set("shape", Ints{1, 1});
                                         return a;
                                       }())},
                        {}, "free/add");
  b.create(Op::Relu, {sum}, {}, "free/relu");
  b.scalar(1.0f, "isolated");
  ASSERT_EQ(errorText(place(*m, 2)), "");
  EXPECT_EQ(node(*m, "free/add").assignedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(node(*m, "free/add").placementReason(),
            "follows its input 'tower_1/dense/MatMul' (gpu:1)");
  EXPECT_EQ(node(*m, "free/relu").placementReason(), "follows its input 'free/add' (gpu:1)");
  EXPECT_EQ(node(*m, "isolated").assignedDevice(), DeviceId::host());
  EXPECT_EQ(node(*m, "isolated").placementReason(),
            "no request, tower or placed neighbour: the host");
}

TEST(Placer, MirroredVariablesHaveAGroupPerReplica) {
  TowerGraphOptions o;
  o.mirrored = true;
  o.towers = 3;
  o.batch = 9;
  auto m = buildTowerGraph(o);
  auto groups = ColocationGroups::build(m->main());
  ASSERT_TRUE(bool(groups)) << llvm::toString(groups.takeError());
  const Graph &g = m->main();
  for (int t = 0; t < 3; ++t) {
    std::string tower = "tower_" + std::to_string(t);
    const Node *update = g.findNode(tower + "/update/dense.weight");
    unsigned gi = groups->groupOf(update);
    std::vector<std::string> names;
    for (const Node *n : groups->members(gi))
      names.push_back(n->name());
    std::string read = t == 0 ? "dense.weight" : "dense.weight_" + std::to_string(t);
    EXPECT_EQ(names, (std::vector<std::string>{read, tower + "/update/dense.weight"}));
    EXPECT_EQ(groups->storage(gi).size(), 2u);
    EXPECT_EQ(groups->storage(gi)[0], (VariableReplica{"dense.weight", (unsigned)t}));
  }
  ASSERT_EQ(errorText(place(*m, 3)), "");
  EXPECT_EQ(node(*m, "tower_2/update/dense.weight").assignedDevice(), DeviceId::gpu(2));
  EXPECT_EQ(node(*m, "tower_2/allreduce").assignedDevice(), DeviceId::gpu(2));
  EXPECT_EQ(m->findVariable("dense.weight.momentum")->devices,
            (std::vector<DeviceId>{DeviceId::gpu(0), DeviceId::gpu(1), DeviceId::gpu(2)}));
}

TEST(Placer, MirroredReadWithoutRequestOrTowerIsAnError) {
  TowerGraphOptions o;
  o.mirrored = true;
  auto m = buildTowerGraph(o);
  Node *read = m->main().findNode("dense.weight_1");
  read->setRequestedDevice(std::nullopt);
  read->setTower(-1);
  EXPECT_EQ(errorText(place(*m, 2)),
            "node 'dense.weight_1' (Variable): uses variable 'dense.weight', which has a replica "
            "on each of gpu:0, gpu:1, but neither a requested device nor a tower says which "
            "replica");
}

TEST(Placer, UnusedVariablesGetTheHost) {
  auto m = buildTowerGraph({});
  m->addVariable(makeVar("unused", {2}, VarKind::State));
  Variable kept = makeVar("kept", {2}, VarKind::State);
  kept.devices = {DeviceId::gpu(1)};
  m->addVariable(kept);
  ASSERT_EQ(errorText(place(*m, 2)), "");
  EXPECT_EQ(m->findVariable("unused")->devices, std::vector<DeviceId>{DeviceId::host()});
  EXPECT_EQ(m->findVariable("kept")->devices, std::vector<DeviceId>{DeviceId::gpu(1)});
}

TEST(Placer, IsDeterministic) {
  TowerGraphOptions o;
  o.requestTowerNodes = false;
  auto a = buildTowerGraph(o), b = buildTowerGraph(o);
  ASSERT_EQ(errorText(place(*a, 2)), "");
  ASSERT_EQ(errorText(place(*b, 2)), "");
  std::string sa, sb;
  llvm::raw_string_ostream osa(sa), osb(sb);
  print(*a, osa);
  print(*b, osb);
  EXPECT_EQ(osa.str(), osb.str());
  // Placing again changes nothing.
  ASSERT_EQ(errorText(place(*a, 2)), "");
  std::string again;
  llvm::raw_string_ostream osc(again);
  print(*a, osc);
  EXPECT_EQ(osc.str(), osa.str());
}

TEST(Placer, DoesNotDependOnTheOrderNodesWereCreatedIn) {
  for (bool requested : {true, false}) {
    TowerGraphOptions o;
    o.towers = 3;
    o.batch = 9;
    o.requestTowerNodes = requested;
    auto forward = buildTowerGraph(o);
    o.reverseTowers = true;
    auto reversed = buildTowerGraph(o);
    ASSERT_EQ(errorText(place(*forward, 3)), "");
    ASSERT_EQ(errorText(place(*reversed, 3)), "");
    auto byName = [](const Module &m) {
      std::map<std::string, std::string> out;
      for (const Node *n : m.findGraph("main")->nodes())
        out[n->name()] = deviceText(n->assignedDevice()) + " / " + n->placementReason();
      return out;
    };
    EXPECT_EQ(byName(*forward), byName(*reversed)) << placementOf(*forward);
  }
}

TEST(Placer, ExplainPrintsOneAlignedRowPerNode) {
  auto m = buildTowerGraph({});
  ASSERT_EQ(errorText(place(*m, 2, noGpuKernelFor(Op::Relu))), "");
  std::string s;
  llvm::raw_string_ostream os(s);
  printPlacementExplanation(*m, os);
  llvm::SmallVector<llvm::StringRef, 32> lines;
  llvm::StringRef(os.str()).trim().split(lines, '\n');
  ASSERT_EQ(lines.size(), m->main().numNodes() + 1);
  EXPECT_TRUE(lines[0].startswith("node")) << lines[0].str();
  size_t opColumn = lines[0].find("op");
  for (llvm::StringRef l : lines)
    if (l.contains("tower_1/dense/Relu")) {
      EXPECT_EQ(l.substr(opColumn, 4), "Relu");
      EXPECT_TRUE(l.contains("gpu:1")) << l.str();
      EXPECT_TRUE(l.endswith("requested gpu:1, but no gpu kernel for Relu: cpu:0")) << l.str();
    }
}

TEST(PlaceDevicesPass, NeedsAPlacerAndChecksItsResult) {
  auto m = buildTowerGraph({});
  CompileOptions opts;
  auto none = placeDevices(*m, opts.placer);
  ASSERT_FALSE(bool(none));
  EXPECT_NE(llvm::toString(none.takeError()).find("CompileOptions::placer is not set"),
            std::string::npos);

  opts.placer = [](Module &) { return llvm::Error::success(); }; // places nothing
  auto lazy = placeDevices(*m, opts.placer);
  ASSERT_FALSE(bool(lazy));
  EXPECT_EQ(llvm::toString(lazy.takeError()),
            "variable 'dense.weight' has no storage device after placement");

  opts.placer = makePlacerFunction(Cluster::defaultCluster(2), anyKernelAnywhere);
  auto ok = placeDevices(*m, opts.placer);
  ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
  EXPECT_TRUE(*ok);
}
