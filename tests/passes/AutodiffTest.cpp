//===- AutodiffTest.cpp - autodiff: structure, the rule table, errors -------===//
//
// Numbers are checked against finite differences in GradCheckTest.cpp; this
// file pins what the sweep builds and how it fails.
//
//===----------------------------------------------------------------------===//

#include "PassTestUtil.h"

#include "ir/Verifier.h"
#include "passes/autodiff/Autodiff.h"

#include "llvm/ADT/DenseSet.h"

#include <gtest/gtest.h>

using namespace graphc;
using passtest::addVariable;

namespace {

Value *scalarSum(Builder &b, Value *v) {
  Attrs a;
  a.set("keepdims", int64_t(0));
  return b.create(Op::ReduceSum, {v}, a, "sum");
}

std::vector<Node *> gradientNodes(const Graph &g) {
  std::vector<Node *> out;
  for (Node *n : g.nodes())
    if (n->attrs().has("grad_of"))
      out.push_back(n);
  return out;
}

std::string errorOf(Module &m) {
  auto r = differentiate(m);
  return r ? "no error" : llvm::toString(r.takeError());
}

TEST(Autodiff, OneGradientPerTrainableVariableSummedOverReads) {
  auto m = std::make_unique<Module>("shared");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 3}));
  Value *w = addVariable(b, "w", {3});
  addVariable(b, "unused", {3});
  Value *state = addVariable(b, "state", {3}, VarKind::State);
  Value *y = b.create(Op::Mul, {x, w}, {}, "layer1/mul");
  y = b.create(Op::Add, {y, state}, {}, "layer1/add");
  y = b.create(Op::Mul, {y, b.variable("w")}, {}, "layer2/mul");
  m->main().addOutput(scalarSum(b, y));
  ASSERT_TRUE(bool(differentiate(*m)));
  ASSERT_FALSE(bool(verify(*m)));
  Graph &g = m->main();

  auto grads = gradientNodes(g);
  ASSERT_EQ(grads.size(), 1u); // no gradient for 'unused' (not on the path) or 'state'
  Node *gw = grads[0];
  EXPECT_EQ(gw->name(), "grad/w");
  EXPECT_EQ(gw->op(), Op::Identity);
  EXPECT_EQ(gw->attrs().getString("grad_of"), "w");
  EXPECT_EQ(gw->result()->type(), TensorType(DType::F32, {3}));
  Node *sum = gw->operand(0)->producer();
  EXPECT_EQ(sum->op(), Op::AddN);
  EXPECT_EQ(sum->name(), "grad/w/sum");
  EXPECT_EQ(sum->numOperands(), 2u);
  // Broadcasting [2,3]·[3] is undone with a ReduceSum over the batch axis.
  for (Value *part : sum->operands()) {
    EXPECT_EQ(part->producer()->op(), Op::ReduceSum) << part->name();
    EXPECT_TRUE(llvm::StringRef(part->name()).startswith("grad/layer")) << part->name();
  }
  Node *seed = g.findNode("grad/seed");
  ASSERT_TRUE(seed);
  EXPECT_EQ(seed->op(), Op::Constant);
  EXPECT_EQ(seed->attrs().getTensor("value")->at(0), 1.0);
}

TEST(Autodiff, GradientNodesFollowTheForwardNodesPlacement) {
  auto m = std::make_unique<Module>("placed");
  Builder b(m->main());
  Value *w = addVariable(b, "w", {4});
  Node *t = b.createNode(Op::Tanh, {w}, {}, "block/tanh");
  t->setRequestedDevice(DeviceId::gpu(1));
  t->setTower(2);
  m->main().addOutput(scalarSum(b, t->result()));
  ASSERT_TRUE(bool(differentiate(*m)));
  Node *g = m->main().findNode("grad/block/tanh/grad");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->op(), Op::TanhGrad);
  EXPECT_EQ(g->requestedDevice(), DeviceId::gpu(1));
  EXPECT_EQ(g->tower(), 2);
  EXPECT_EQ(g->operand(0), t->result());
}

TEST(Autodiff, IntegerAndLabelPathsGetNoGradient) {
  // A float parameter cast to indices feeds a Transfer (which has no rule) and
  // a Gather; only the gathered table is differentiated.
  auto m = std::make_unique<Module>("ints");
  Builder b(m->main());
  Value *pick = addVariable(b, "pick", {2});
  Value *table = addVariable(b, "table", {5, 3});
  Attrs cast;
  cast.set("to", DType::I64);
  Value *idx = b.create(Op::Cast, {pick}, cast, "to_index");
  idx = b.create(Op::Transfer, {idx}, {}, "move");
  Value *rows = b.create(Op::Gather, {table, idx}, {}, "gather");
  m->main().addOutput(scalarSum(b, rows));
  auto r = differentiate(*m);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  auto grads = gradientNodes(m->main());
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(grads[0]->name(), "grad/table");
  EXPECT_EQ(grads[0]->operand(0)->producer()->op(), Op::GatherGrad);
}

TEST(Autodiff, MissingRuleNamesTheOpAndTheNode) {
  auto m = std::make_unique<Module>("missing");
  Builder b(m->main());
  Value *w = addVariable(b, "w", {4});
  Value *moved = b.create(Op::Transfer, {w}, {}, "to_gpu");
  m->main().addOutput(scalarSum(b, moved));
  std::string msg = errorOf(*m);
  EXPECT_NE(msg.find("node 'to_gpu' (Transfer)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no gradient rule for op 'Transfer'"), std::string::npos) << msg;
}

TEST(Autodiff, UnsupportedAttributesNameTheNode) {
  auto m = std::make_unique<Module>("strided");
  Builder b(m->main());
  Value *w = addVariable(b, "w", {6});
  Attrs s;
  s.set("starts", Ints{0});
  s.set("ends", Ints{6});
  s.set("steps", Ints{2});
  Value *y = b.create(Op::Slice, {w}, s, "every_other");
  m->main().addOutput(scalarSum(b, y));
  std::string msg = errorOf(*m);
  EXPECT_NE(msg.find("node 'every_other' (Slice)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("step"), std::string::npos) << msg;
}

TEST(Autodiff, LossMustBeAScalarThatDependsOnAParameter) {
  auto notScalar = std::make_unique<Module>("vector_loss");
  Builder b(notScalar->main());
  notScalar->main().addOutput(b.create(Op::Neg, {addVariable(b, "w", {3})}));
  EXPECT_NE(errorOf(*notScalar).find("must be a scalar"), std::string::npos);

  auto constant = std::make_unique<Module>("constant_loss");
  Builder c(constant->main());
  addVariable(c, "w", {3});
  constant->main().addOutput(scalarSum(c, c.input("x", TensorType(DType::F32, {3}))));
  EXPECT_NE(errorOf(*constant).find("does not depend on any trainable variable"),
            std::string::npos);

  auto empty = std::make_unique<Module>("no_output");
  empty->main();
  EXPECT_NE(errorOf(*empty).find("no output"), std::string::npos);
}

TEST(Autodiff, AVariableNamedLikeAGradientNodeStillGetsItsName) {
  // "grad/seed" is the seed constant's name; the variable 'seed' claims it.
  auto m = std::make_unique<Module>("clash");
  Builder b(m->main());
  m->main().addOutput(scalarSum(b, b.create(Op::Exp, {addVariable(b, "seed", {2})})));
  ASSERT_TRUE(bool(differentiate(*m)));
  ASSERT_FALSE(bool(verify(*m)));
  Node *g = m->main().findNode("grad/seed");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->attrs().getString("grad_of"), "seed");
}

TEST(Autodiff, EveryForwardOpHasARuleOrAMarker) {
  // Ops that only exist after autodiff (gradients, updates, towers) need none;
  // every other op must be differentiable or explicitly marked.
  llvm::DenseSet<unsigned> exempt;
  for (Op op : {Op::ConvGradData,
                Op::ConvGradFilter,
                Op::MaxPoolGrad,
                Op::AveragePoolGrad,
                Op::BatchNormTrainGrad,
                Op::ReluGrad,
                Op::LeakyReluGrad,
                Op::SigmoidGrad,
                Op::TanhGrad,
                Op::SoftmaxGrad,
                Op::LogSoftmaxGrad,
                Op::ClipGrad,
                Op::GatherGrad,
                Op::SoftmaxCrossEntropyGrad,
                Op::ErfGrad,
                Op::GeluGrad,
                Op::HardSigmoidGrad,
                Op::HardSwishGrad,
                Op::LayerNormGrad,
                Op::SplitBatch,
                Op::ConcatBatch,
                Op::Transfer,
                Op::AllReduce,
                Op::ReduceScatter,
                Op::AllGather})
    exempt.insert((unsigned)op);
  for (unsigned i = 0; i < numOps(); ++i) {
    if (!exempt.count(i)) {
      EXPECT_TRUE(hasGradientRule((Op)i)) << opName((Op)i).str();
    }
  }
  EXPECT_FALSE(hasGradientRule(Op::Transfer));
}

} // namespace
