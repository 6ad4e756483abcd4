//===- BatchStagingTest.cpp - The batch split on a GPU, and the step a graph --===//
//
// executor/BatchStaging.h moves a tower plan's batch plumbing (the global
// input, its split, the joins of tower outputs) from the host onto a GPU.
// Here, without a GPU: which nodes move in inception_v3's placed plans and
// that nothing is left on the host for --params gpu:0, mirrored and spread
// (so the step may become one CUDA graph: stepCaptureRefusal agrees), what
// stays, and that a plan with the plumbing moved trains bit for bit like the
// plan (uneven splits and an empty tower included), run on emulated devices.
//
//===----------------------------------------------------------------------===//

#include "TowerTestUtil.h"

#include "executor/BatchStaging.h"
#include "executor/StepCapture.h"
#include "ir/Builder.h"
#include "ir/DeviceId.h"
#include "kernels/Kernel.h"
#include "placement/Placer.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

DeviceId assigned(const Node &n) {
  return n.assignedDevice().value_or(DeviceId::host());
}

/// inception_v3 (75x75, batch 8), compiled and placed by the real placer on
/// the host and `towers` GPUs; kernels where this build has them.
std::unique_ptr<Module> placedInception(int towers, const std::string &params) {
  models::ModelOptions mo;
  mo.imageSize = 75;
  auto m = buildOrFail("inception_v3", mo);
  if (!m)
    return nullptr;
  CompileOptions o;
  o.batch = 8;
  o.towers = towers;
  o.params = cantFail(parseParamPlacement(params));
  o.optimizer = "momentum";
  o.placer = makePlacerFunction(Cluster::defaultCluster(towers), [](const Node &n, DeviceKind k) {
    return KernelRegistry::global().supports(n, k);
  });
  if (auto e = runPipeline(
          *m, std::string(kTowerPipeline) + ",place-devices,insert-transfers,verify", o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  return m;
}

/// Where each node of `g` runs once the batch is staged.
std::map<const Node *, DeviceId> stagedDevices(const Graph &g) {
  auto moved = stageBatchOnDevices(g, assigned);
  std::map<const Node *, DeviceId> where;
  for (const Node *n : g.nodes()) {
    auto it = moved.find(n);
    where[n] = it != moved.end() ? it->second : assigned(*n);
  }
  return where;
}

std::vector<DeviceKind> kindsOf(const std::map<const Node *, DeviceId> &where) {
  std::set<DeviceId> devices;
  for (auto &[n, d] : where)
    devices.insert(d);
  std::vector<DeviceKind> kinds;
  for (DeviceId d : devices)
    kinds.push_back(d.kind);
  return kinds;
}

struct InceptionCase {
  int towers;
  std::string params;
};

class StagedInception : public testing::TestWithParam<InceptionCase> {};

TEST_P(StagedInception, NothingIsLeftOnTheHostAndTheStepIsCapturable) {
  const InceptionCase &c = GetParam();
#if !GRAPHC_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA kernels to place inception_v3's GPU towers with";
#endif
  auto m = placedInception(c.towers, c.params);
  ASSERT_TRUE(m);
  const Graph &g = m->main();
  // Before: the plan takes the batch and joins the outputs on the host.
  std::set<std::string> hostOps;
  for (const Node *n : g.nodes())
    if (assigned(*n).kind == DeviceKind::CPU)
      hostOps.insert(opName(n->op()).str());
  EXPECT_TRUE(hostOps.count("SplitBatch") && hostOps.count("Input")) << c.params;

  std::map<const Node *, DeviceId> where = stagedDevices(g);
  for (auto &[n, d] : where)
    EXPECT_EQ(d.kind, DeviceKind::GPU)
        << n->name() << " (" << opName(n->op()).str() << ") stays on " << d;
  // The batch goes to tower 0's GPU, and is split there.
  for (const char *input : {"input", "labels"}) {
    const Node *in = g.findInput(input);
    ASSERT_TRUE(in) << input;
    EXPECT_EQ(where[in], DeviceId::gpu(0)) << input;
    for (const Node *u : in->result()->users()) {
      EXPECT_EQ(u->op(), Op::SplitBatch);
      EXPECT_EQ(where[u], DeviceId::gpu(0));
    }
  }
  std::vector<DeviceKind> kinds = kindsOf(where);
  EXPECT_EQ(stepCaptureRefusal(g, kinds, false, false), "")
      << c.towers << " towers, --params " << c.params;
  // Against the plan as placed: the host device keeps it out of a graph.
  std::vector<DeviceKind> placedKinds;
  for (const Node *n : g.nodes())
    placedKinds.push_back(assigned(*n).kind);
  EXPECT_NE(stepCaptureRefusal(g, placedKinds, false, false).find("host device"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Plans, StagedInception,
                         testing::Values(InceptionCase{1, "gpu:0"}, InceptionCase{2, "mirrored"},
                                         InceptionCase{4, "mirrored"}, InceptionCase{2, "gpu:0"},
                                         InceptionCase{3, "spread"}),
                         [](const testing::TestParamInfo<InceptionCase> &info) {
                           std::string p =
                               info.param.params == "gpu:0" ? "gpu0" : info.param.params;
                           return p + "_N" + std::to_string(info.param.towers);
                         });

TEST(BatchStaging, AParameterServerOnTheHostKeepsItsWorkButTheSplitMoves) {
  models::ModelOptions mo;
  mo.imageSize = 75;
  auto m = buildOrFail("inception_v3", mo);
  ASSERT_TRUE(m);
  CompileOptions o;
  o.batch = 8;
  o.towers = 2;
  o.params = cantFail(parseParamPlacement("cpu"));
  o.placer = makePlacerFunction(Cluster::defaultCluster(2), anyKernelAnywhere);
  ASSERT_FALSE(bool(
      runPipeline(*m, std::string(kTowerPipeline) + ",place-devices,insert-transfers,verify", o)));
  std::map<const Node *, DeviceId> where = stagedDevices(m->main());
  EXPECT_EQ(where[m->main().findInput("input")], DeviceId::gpu(0));
  // The variables and their updates stay on the host: no graph, and the
  // reason says so.
  std::string why = stepCaptureRefusal(m->main(), kindsOf(where), false, false);
#if GRAPHC_HAVE_CUDA
  EXPECT_NE(why.find("host device"), std::string::npos) << why;
#else
  EXPECT_EQ(why, "this build has no CUDA backend");
#endif
}

TEST(BatchStaging, EmulatedGpusStayWhereThePlanPutThem) {
  // --emulate maps a plan's GPUs onto CPU devices: nothing is a GPU.
#if !GRAPHC_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA kernels to place inception_v3's GPU towers with";
#endif
  auto m = placedInception(2, "mirrored");
  ASSERT_TRUE(m);
  auto moved = stageBatchOnDevices(m->main(), [](const Node &n) { return emulate(assigned(n)); });
  EXPECT_TRUE(moved.empty());
}

/// x on the host, a Transfer to gpu:0 and `extraReader` reading it on
/// `readerDevice`; the result of the GPU side copied back as the output.
struct HandMade {
  Module m;
  Node *input = nullptr, *toGpu = nullptr, *back = nullptr;
  explicit HandMade(std::optional<DeviceId> readerDevice) {
    Builder b(m.main());
    Value *x = b.input("x", TensorType(DType::F32, {4, 3}));
    input = x->producer();
    input->setAssignedDevice(DeviceId::host());
    Attrs t;
    t.set("to", std::string("gpu:0"));
    toGpu = b.createNode(Op::Transfer, {x}, t, "to_gpu");
    toGpu->setAssignedDevice(DeviceId::gpu(0));
    Node *relu = b.createNode(Op::Relu, {toGpu->result()}, {}, "relu");
    relu->setAssignedDevice(DeviceId::gpu(0));
    Attrs h;
    h.set("to", std::string("cpu:0"));
    back = b.createNode(Op::Transfer, {relu->result()}, h, "back");
    back->setAssignedDevice(DeviceId::host());
    m.main().addOutput(back->result());
    if (readerDevice) {
      Node *other = b.createNode(Op::Neg, {x}, {}, "host_reader");
      other->setAssignedDevice(readerDevice);
      m.main().addOutput(other->result());
    }
  }
};

TEST(BatchStaging, AnInputOnlyGpusReadMovesAndSoDoesAnOutputOnlyCopiedBack) {
  HandMade h(std::nullopt);
  auto moved = stageBatchOnDevices(h.m.main(), assigned);
  EXPECT_EQ(moved.lookup(h.input), DeviceId::gpu(0));
  EXPECT_EQ(moved.lookup(h.back), DeviceId::gpu(0));
  EXPECT_EQ(moved.size(), 2u);
}

TEST(BatchStaging, AnInputTheHostReadsStays) {
  HandMade h(DeviceId::host());
  auto moved = stageBatchOnDevices(h.m.main(), assigned);
  EXPECT_FALSE(moved.count(h.input));
  EXPECT_EQ(moved.lookup(h.back), DeviceId::gpu(0))
      << "the output copy is independent of the input";
}

TEST(BatchStaging, ASplitWithAHostTowerStays) {
  // Tower 1 on the host: its slice is read there, so the split stays.
  auto m = buildOrFail("mlp", [] {
    models::ModelOptions o;
    o.imageSize = 4;
    o.hiddenSizes = {8};
    o.numClasses = 3;
    return o;
  }());
  ASSERT_TRUE(m);
  CompileOptions o;
  o.batch = 6;
  o.towers = 2;
  o.params = cantFail(parseParamPlacement("mirrored"));
  ASSERT_FALSE(bool(runPipeline(*m, kTowerPipeline, o)));
  for (Node *n : m->main().nodes())
    n->setAssignedDevice(n->tower() == 1 ? DeviceId::cpu(1)
                                         : n->requestedDevice().value_or(DeviceId::host()));
  ASSERT_FALSE(bool(runPipeline(*m, "insert-transfers,verify", o)));
  auto moved = stageBatchOnDevices(m->main(), assigned);
  for (const char *input : {"input", "labels"})
    EXPECT_FALSE(moved.count(m->main().findInput(input))) << input;
}

//===-- The staged plan computes what the plan computes ------------------===//

struct TrainCase {
  std::string model, params;
  int towers;
  int64_t batch;
};

void PrintTo(const TrainCase &c, std::ostream *os) {
  *os << c.model << ", " << c.towers << " towers, batch " << c.batch << ", params " << c.params;
}

class StagedTraining : public testing::TestWithParam<TrainCase> {};

TEST_P(StagedTraining, BitForBitLikeThePlan) {
  const TrainCase &c = GetParam();
  models::ModelOptions mo;
  mo.imageSize = 8;
  mo.numClasses = 5;
  if (c.model == "mlp")
    mo.hiddenSizes = {16, 8};
  else
    mo.dropout = 0.3; // masks drawn per tower and step, wherever the batch is split
  CompileOptions o;
  o.batch = c.batch;
  o.towers = c.towers;
  o.params = cantFail(parseParamPlacement(c.params));
  o.remainder = RemainderPolicy::Uneven;
  std::unique_ptr<Module> plans[2];
  for (auto &m : plans) {
    m = buildOrFail(c.model, mo);
    ASSERT_TRUE(m);
    llvm::Error e = compileTowers(*m, o);
    ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  }
  // The second plan with its batch plumbing where the executor puts it on
  // GPUs (here the GPUs are emulated, so the executor itself leaves it).
  auto moved = stageBatchOnDevices(plans[1]->main(), assigned);
  ASSERT_FALSE(moved.empty());
  for (auto &[n, device] : moved)
    const_cast<Node *>(n)->setAssignedDevice(device);
  // The batch and its split move (lr, read on the host under --params cpu,
  // may stay).
  for (const Node *n : plans[1]->main().nodes())
    if (n->op() == Op::SplitBatch) {
      EXPECT_NE(assigned(*n), DeviceId::host()) << n->name();
      EXPECT_EQ(assigned(*n), assigned(*n->operand(0)->producer())) << n->name();
    }

  Batch b = randomBatch(plans[0]->main().findInput("input")->result()->type(), 5, 3);
  std::map<std::string, Tensor> vars[2];
  std::vector<Tensor> outs[2];
  for (int i = 0; i < 2; ++i) {
    auto ex = makeExecutor(*plans[i]);
    ASSERT_TRUE(ex);
    auto r = train(*ex, b, 3, 0.05f);
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    outs[i] = std::move(*r);
    vars[i] = variables(*ex);
  }
  ASSERT_EQ(outs[0].size(), outs[1].size());
  for (size_t k = 0; k < outs[0].size(); ++k)
    EXPECT_EQ(outs[0][k], outs[1][k]) << "output " << k;
  expectSameBits(vars[1], vars[0], "staged plan");
}

INSTANTIATE_TEST_SUITE_P(Towers, StagedTraining,
                         testing::Values(TrainCase{"small_cnn_nobn", "mirrored", 3, 7},
                                         TrainCase{"mlp", "gpu:0", 3, 2}, // tower 2 is empty
                                         TrainCase{"mlp", "cpu", 2, 5},
                                         TrainCase{"small_cnn", "spread", 2, 6}),
                         [](const testing::TestParamInfo<TrainCase> &info) {
                           const TrainCase &c = info.param;
                           std::string p = c.params == "gpu:0" ? "gpu0" : c.params;
                           return c.model + "_" + p + "_N" + std::to_string(c.towers) + "_B" +
                                  std::to_string(c.batch);
                         });

} // namespace
