//===- ReplicateTest.cpp - What replicate-towers builds and refuses ---------===//

#include "TowerTestUtil.h"

#include "ir/Builder.h"
#include "ir/Equivalence.h"
#include "passes/TowerReplication.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

std::unique_ptr<Module> smallMlp() {
  models::ModelOptions o;
  o.imageSize = 4;
  o.hiddenSizes = {8, 8};
  o.numClasses = 3;
  return buildOrFail("mlp", o);
}

CompileOptions towersOf(int towers, int64_t batch) {
  CompileOptions o;
  o.towers = towers;
  o.batch = batch;
  return o;
}

TEST(Replicate, TowersAreNamedPlacedAndShareTheVariables) {
  auto m = smallMlp();
  ASSERT_TRUE(m);
  size_t variablesBefore = 0;
  {
    auto single = smallMlp();
    ASSERT_FALSE(bool(runPipeline(*single, kSingleDevicePipeline, towersOf(1, 6))));
    variablesBefore = single->variables().size();
  }
  llvm::Error e = runPipeline(*m,
                              "bind-batch,training-mode,add-loss,autodiff,add-optimizer,"
                              "replicate-towers,verify",
                              towersOf(3, 6));
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  EXPECT_EQ(m->variables().size(), variablesBefore) << "one set of variables for every tower";
  EXPECT_EQ(m->plan().towers, 3);
  EXPECT_EQ(m->plan().towerBatches, (Ints{2, 2, 2}));
  std::map<std::string, int> reads;
  for (Node *n : m->main().nodes()) {
    if (n->op() == Op::Input && n->tower() < 0) {
      EXPECT_EQ(n->name(), "lr") << "only non-batch inputs stay shared";
      continue;
    }
    if (isVariableUpdate(n->op()) || (n->op() == Op::AddN && n->tower() < 0)) {
      EXPECT_EQ(n->tower(), -1) << n->name();
      continue;
    }
    int tower = -1;
    llvm::StringRef base = stripTowerPrefix(n->name(), &tower);
    ASSERT_GE(tower, 0) << n->name();
    EXPECT_EQ(n->tower(), tower) << n->name();
    EXPECT_FALSE(base.startswith("tower_")) << n->name();
    if (n->op() == Op::Variable) {
      EXPECT_EQ(n->requestedDevice(), std::nullopt) << "storage is aggregate-gradients' choice";
      ++reads[n->attrs().getString("var")];
    } else if (n->op() == Op::Input) {
      EXPECT_EQ(n->requestedDevice(), DeviceId::host()) << n->name();
      EXPECT_EQ(n->result()->type().shape[0], 2) << n->name();
    } else {
      EXPECT_EQ(n->requestedDevice(), towerDevice(tower)) << n->name();
    }
  }
  for (const auto &[var, count] : reads)
    EXPECT_EQ(count, 3) << "each tower reads '" << var << "' through its own Variable node";
  // Gradients: the towers' parts summed into the one the update reads.
  Node *sum = m->main().findNode("grad/fc1.weight");
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum->op(), Op::AddN);
  EXPECT_EQ(sum->attrs().getString("grad_of"), "fc1.weight");
  ASSERT_EQ(sum->numOperands(), 3u);
  for (unsigned t = 0; t < 3; ++t) {
    Node *part = sum->operand(t)->producer();
    EXPECT_EQ(part->name(), towerPrefix((int)t) + "grad/fc1.weight");
    EXPECT_EQ(part->attrs().getString("tower_grad_of"), "fc1.weight");
    EXPECT_FALSE(part->attrs().has("grad_of"));
  }
  // The loss keeps the scale of the global batch.
  for (Node *n : m->main().nodes()) {
    if (n->op() == Op::SoftmaxCrossEntropy || n->op() == Op::SoftmaxCrossEntropyGrad) {
      EXPECT_DOUBLE_EQ(n->attrs().getFloat("scale"), 1.0 / 6) << n->name();
    }
  }
  // Copies of one node are adjacent (the single-device order, lifted).
  std::vector<std::string> order;
  for (Node *n : m->main().nodes())
    if (n->tower() >= 0)
      order.push_back(stripTowerPrefix(n->name()).str());
  for (size_t i = 0; i + 2 < order.size(); i += 3)
    EXPECT_TRUE(order[i] == order[i + 1] && order[i] == order[i + 2]) << order[i];
}

TEST(Replicate, ZeroTowersLeaveTheSingleDeviceGraphAlone) {
  auto single = smallMlp(), none = smallMlp();
  ASSERT_TRUE(single && none);
  ASSERT_FALSE(bool(runPipeline(*single, kSingleDevicePipeline, towersOf(1, 4))));
  ASSERT_FALSE(bool(runPipeline(*none, kTowerPipeline, towersOf(0, 4))));
  std::string why;
  EXPECT_TRUE(structurallyEqual(*single, *none, &why)) << why;
}

TEST(Replicate, DropShrinksTheBatchAndTheLossScaleFollows) {
  auto m = smallMlp();
  ASSERT_TRUE(m);
  CompileOptions o = towersOf(4, 7);
  o.remainder = cantFail(parseRemainderPolicy("drop"));
  llvm::Error e = runPipeline(*m, kTowerPipeline, o);
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  EXPECT_EQ(m->batch(), 4);
  EXPECT_EQ(m->main().findInput("input")->result()->type().shape[0], 4);
  for (Node *n : m->main().nodes()) {
    if (n->op() == Op::SoftmaxCrossEntropy) {
      EXPECT_DOUBLE_EQ(n->attrs().getFloat("scale"), 0.25) << n->name();
    }
  }
}

TEST(Replicate, ABatchSmallerThanTheTowersUnderErrorSaysWhichPoliciesExist) {
  auto m = smallMlp();
  ASSERT_TRUE(m);
  CompileOptions o = towersOf(4, 3);
  o.remainder = cantFail(parseRemainderPolicy("error"));
  llvm::Error e = runPipeline(*m, kTowerPipeline, o);
  ASSERT_TRUE(bool(e));
  std::string msg = llvm::toString(std::move(e));
  EXPECT_NE(msg.find("replicate-towers: the global batch of 3 is smaller than the 4 towers"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("uneven"), std::string::npos) << msg;
  EXPECT_NE(msg.find("drop"), std::string::npos) << msg;
}

TEST(Replicate, RefusesAModuleThatHasTowersAlready) {
  auto m = smallMlp();
  ASSERT_TRUE(m);
  ASSERT_FALSE(bool(runPipeline(*m, kTowerPipeline, towersOf(2, 4))));
  auto again = replicateTowers(*m, towerOptions(towersOf(2, 4)));
  ASSERT_FALSE(bool(again));
  EXPECT_NE(llvm::toString(again.takeError()).find("already has towers"), std::string::npos);
}

/// A forward graph x [4, 3] -> `body` -> output, batch bound to 4.
std::unique_ptr<Module> forward(const std::function<Value *(Builder &, Value *)> &body) {
  auto m = std::make_unique<Module>("forward");
  m->plan().batch = int64_t(4);
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {4, 3}));
  m->main().addOutput(body(b, x));
  return m;
}

std::string replicateError(Module &m, int towers) {
  auto r = replicateTowers(m, towerOptions(towersOf(towers, 4)));
  if (r) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(r.takeError());
}

TEST(Replicate, RefusesAReshapeThatFoldsTheBatch) {
  // [4, 3] as [3, 4]: a row holds parts of two samples.
  auto m = forward([](Builder &b, Value *x) {
    Attrs a;
    a.set("shape", Ints{3, 4});
    return b.create(Op::Reshape, {x}, std::move(a), "fold");
  });
  std::string e = replicateError(*m, 2);
  EXPECT_NE(e.find("node 'fold' (Reshape)"), std::string::npos) << e;
  EXPECT_NE(e.find("batch cannot be split across towers"), std::string::npos) << e;
}

TEST(Replicate, RefusesAForwardReductionOverTheBatch) {
  auto m = forward([](Builder &b, Value *x) {
    Attrs a;
    a.set("axes", Ints{0});
    return b.create(Op::ReduceMean, {x}, std::move(a), "batch_mean");
  });
  std::string e = replicateError(*m, 2);
  EXPECT_NE(e.find("node 'batch_mean' (ReduceMean): reduces over the batch in the forward pass"),
            std::string::npos)
      << e;
  // One tower sees the whole batch: nothing changes, nothing to refuse.
  auto one = forward([](Builder &b, Value *x) {
    Attrs a;
    a.set("axes", Ints{0});
    return b.create(Op::ReduceMean, {x}, std::move(a), "batch_mean");
  });
  EXPECT_TRUE(bool(replicateTowers(*one, towerOptions(towersOf(1, 4)))));
}

TEST(Replicate, BatchSizedAttributesFollowTheTowerBatch) {
  auto m = forward([](Builder &b, Value *x) {
    Attrs a;
    a.set("shape", Ints{4, 3, 1});
    Value *r = b.create(Op::Reshape, {x}, std::move(a), "lift");
    Attrs e;
    e.set("shape", Ints{4, 3, 5});
    return b.create(Op::Expand, {r}, std::move(e), "widen");
  });
  auto r = replicateTowers(*m, towerOptions(towersOf(2, 4)));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(m->main().findNode("tower_1/lift")->attrs().getInts("shape"), (Ints{2, 3, 1}));
  EXPECT_EQ(m->main().findNode("tower_1/widen")->attrs().getInts("shape"), (Ints{2, 3, 5}));
  EXPECT_EQ(m->main().findNode("tower_1/widen")->result()->type().shape, (Dims{2, 3, 5}));
}

TEST(Replicate, ABatchInterleavedWithPositionsFollowsTheTowers) {
  // Sequence first, as PyTorch's attention runs: x [4, 3] transposed to
  // [3, 4] (positions, samples), flattened to [12] (sample minor) and back.
  auto m = forward([](Builder &b, Value *x) {
    Attrs perm;
    perm.set("perm", Ints{1, 0});
    Value *t = b.create(Op::Transpose, {x}, std::move(perm), "seq_first");
    Attrs flat, back;
    flat.set("shape", Ints{12});
    back.set("shape", Ints{3, 4});
    Value *rows = b.create(Op::Relu, {b.create(Op::Reshape, {t}, std::move(flat), "rows")});
    return b.create(Op::Reshape, {rows}, std::move(back), "unflatten");
  });
  auto r = replicateTowers(*m, towerOptions(towersOf(2, 4)));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(m->main().findNode("tower_1/rows")->attrs().getInts("shape"), (Ints{6}));
  EXPECT_EQ(m->main().findNode("tower_1/unflatten")->attrs().getInts("shape"), (Ints{3, 2}));
}

TEST(Replicate, IntegerTokensSplitLikeAnyInput) {
  // tokens i64 [4, 2] look up rows of a table [10, 3] (an embedding).
  auto m = std::make_unique<Module>("embedding");
  m->plan().batch = int64_t(4);
  {
    Builder b(m->main());
    Variable v;
    v.name = "table";
    v.type = TensorType(DType::F32, {10, 3});
    v.kind = VarKind::Param;
    v.init = {"ones", {}};
    Value *table = b.newVariable(std::move(v));
    Value *tokens = b.input("tokens", TensorType(DType::I64, {4, 2}));
    m->main().addOutput(b.create(Op::Gather, {table, tokens}, {}, "lookup"));
  }
  auto r = replicateTowers(*m, towerOptions(towersOf(2, 4)));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(m->main().findNode("tower_1/lookup")->operand(1)->type(),
            TensorType(DType::I64, {2, 2}));
  EXPECT_EQ(m->main().findNode("tower_1/lookup")->result()->type(),
            TensorType(DType::F32, {2, 2, 3}));
}

TEST(Replicate, LocalBatchNormNeedsTwoValuesPerChannelInEveryTower) {
  // fc -> BatchNorm on [B, C]: one sample per tower leaves one value per
  // channel, which has no variance.
  auto m = std::make_unique<Module>("bn_mlp");
  {
    Builder b(m->main());
    auto var = [&](const std::string &name, Dims shape, VarKind kind, const char *init) {
      Variable v;
      v.name = name;
      v.type = TensorType(DType::F32, shape);
      v.kind = kind;
      v.init = {init, {}};
      return b.newVariable(std::move(v));
    };
    Value *x = b.input("input", TensorType(DType::F32, {2, 3}));
    Value *h = b.create(
        Op::Gemm, {x, var("fc.weight", {4, 3}, VarKind::Param, "ones")},
        [] {
          Attrs a;
          a.set("transB", int64_t(1));
          return a;
        }(),
        "fc");
    Attrs bn;
    bn.set("training", int64_t(1));
    h = b.create(Op::BatchNorm,
                 {h, var("bn.weight", {4}, VarKind::Param, "ones"),
                  var("bn.bias", {4}, VarKind::Param, "zeros"),
                  var("bn.running_mean", {4}, VarKind::State, "zeros"),
                  var("bn.running_var", {4}, VarKind::State, "ones")},
                 std::move(bn), "bn");
    m->main().addOutput(h);
  }
  CompileOptions o = towersOf(2, 2);
  llvm::Error e = runPipeline(*m, kTowerPipeline, o);
  ASSERT_TRUE(bool(e));
  std::string msg = llvm::toString(std::move(e));
  EXPECT_NE(msg.find("more than one value per channel, tower 0 gets f32[1,4]"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--bn sync"), std::string::npos) << msg;
}

} // namespace
