//===- RecomputeTest.cpp - Dropped activations recomputed (passes/Recompute.h) -===//
//
// The rewrite alone, on tower plans whose GPUs are emulated by CPU devices:
// every value it may drop dropped at once (dropout masks and batch norms
// included) trains to the same bits as the plan that keeps them; the copies
// stand in the backward pass (the schedule issues them after every node of
// their device that the loss depends on) and nothing in the backward pass reads a dropped
// value any more. The choice under a memory limit, through the compiler and
// the emulated run, is tests/tools/RecomputeTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/Recompute.h"
#include "ir/Clone.h"
#include "ir/Verifier.h"
#include "placement/analysis/Schedule.h"
#include "tests/towers/TowerTestUtil.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

struct Trained {
  std::map<std::string, Tensor> variables;
  double loss = 0;
};

Trained trainPlan(const Module &m, int steps) {
  Trained t;
  auto ex = makeExecutor(m, 7, true);
  if (!ex)
    return t;
  Batch b = randomBatch(m.findGraph("main")->findInput("input")->result()->type(), 10, 42);
  auto out = train(*ex, b, steps, 0.05f);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return t;
  }
  t.variables = variables(*ex);
  t.loss = (*out)[0].at(0);
  return t;
}

/// `m` compiled for `towers` towers of emulated GPUs, and a copy of it with
/// every droppable value recomputed; checks the copy's shape.
std::pair<std::unique_ptr<Module>, std::unique_ptr<Module>>
compiledBothWays(llvm::StringRef model, models::ModelOptions mo, int64_t batch, int towers) {
  auto m = buildOrFail(model, mo);
  if (!m)
    return {};
  CompileOptions o;
  o.batch = batch;
  o.towers = towers;
  if (auto e = compileTowers(*m, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  std::unique_ptr<Module> r = cloneModule(*m);
  Graph &g = r->main();
  std::vector<Value *> dropped = droppableValues(g, RecomputeAnalysis(g));
  EXPECT_FALSE(dropped.empty());
  std::vector<Node *> copies = recomputeValues(g, dropped);
  EXPECT_FALSE(copies.empty());
  if (auto e = verify(*r))
    ADD_FAILURE() << llvm::toString(std::move(e));

  // Only copies and the forward pass read a dropped value now.
  llvm::DenseSet<const Node *> backward = backwardNodes(g);
  for (const Value *v : dropped)
    for (const Node *u : v->users())
      EXPECT_FALSE(backward.contains(u) && !isRecomputed(*u))
          << u->name() << " reads dropped " << v->name();
  // Each copy is issued after every node of its device that the loss
  // depends on: the forward pass is over, its dropped values dead.
  llvm::DenseSet<const Node *> forward;
  llvm::SmallVector<const Node *, 64> work{g.outputs()[0]->producer()};
  while (!work.empty()) {
    const Node *n = work.pop_back_val();
    if (forward.insert(n).second)
      for (const Value *v : n->operands())
        work.push_back(v->producer());
  }
  auto s = buildSchedule(
      g, [](const Node &n) { return n.assignedDevice().value_or(DeviceId::host()).str(); });
  if (!s) {
    ADD_FAILURE() << llvm::toString(s.takeError());
    return {};
  }
  for (unsigned d = 0; d < s->devices.size(); ++d) {
    unsigned lastForward = 0, firstCopy = ~0u;
    for (const Node *n : s->order[d]) {
      if (isRecomputed(*n))
        firstCopy = std::min(firstCopy, s->position.lookup(n));
      else if (forward.contains(n))
        lastForward = std::max(lastForward, s->position.lookup(n));
    }
    EXPECT_TRUE(firstCopy == ~0u || firstCopy > lastForward) << s->devices[d];
  }
  int dropouts = 0, batchNorms = 0;
  for (const Node *c : copies) {
    const Node *original = g.findNode(c->attrs().getString(kRecomputeOf));
    EXPECT_TRUE(original && original->op() == c->op() && !isRecomputed(*original)) << c->name();
    dropouts += c->op() == Op::DropoutTrain;
    batchNorms += c->op() == Op::BatchNormTrain;
  }
  EXPECT_GT(batchNorms, 0);
  if (mo.dropout != 0) {
    EXPECT_GT(dropouts, 0);
  }
  return {std::move(m), std::move(r)};
}

TEST(Recompute, SmallCnnWithEveryValueDroppedTrainsToTheSameBits) {
  // Dropout on: its copies must draw the original's masks.
  models::ModelOptions mo;
  mo.dropout = 0.5;
  auto [kept, recomputed] = compiledBothWays("small_cnn", mo, 16, 2);
  ASSERT_TRUE(kept && recomputed);
  Trained want = trainPlan(*kept, 3), got = trainPlan(*recomputed, 3);
  ASSERT_FALSE(want.variables.empty());
  EXPECT_EQ(got.loss, want.loss);
  expectSameBits(got.variables, want.variables, "small_cnn, every value recomputed");
}

TEST(Recompute, InceptionWithEveryValueDroppedTrainsToTheSameBits) {
  models::ModelOptions mo;
  mo.imageSize = 75;
  mo.numClasses = 10;
  auto [kept, recomputed] = compiledBothWays("inception_v3", mo, 2, 1);
  ASSERT_TRUE(kept && recomputed);
  Trained want = trainPlan(*kept, 2), got = trainPlan(*recomputed, 2);
  ASSERT_FALSE(want.variables.empty());
  EXPECT_EQ(got.loss, want.loss);
  expectSameBits(got.variables, want.variables, "inception_v3, every value recomputed");
}

} // namespace
