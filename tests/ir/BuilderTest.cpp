#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/ShapeInference.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

Variable param(std::string name, std::initializer_list<int64_t> dims) {
  Variable v;
  v.name = std::move(name);
  v.type = TensorType(DType::F32, dims);
  v.init = {"kaiming_uniform", {2.23606797749979}};
  return v;
}

} // namespace

TEST(Builder, ScopesTowersAndShapes) {
  Module m("net");
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 3, 8, 8}));
  Value *y;
  {
    Builder::Scope s(b, "block1");
    b.setTower(2);
    Attrs a;
    a.set("pads", Ints{1, 1, 1, 1});
    y = b.create(Op::Conv, {x, b.newVariable(param("block1.conv.weight", {4, 3, 3, 3}))}, a,
                 "conv");
    y = b.create(Op::Relu, {y});
  }
  m.main().addOutput(y);
  EXPECT_EQ(y->producer()->name(), "block1/Relu");
  EXPECT_EQ(y->producer()->tower(), 2);
  EXPECT_EQ(toString(y->type()), "f32[N,4,8,8]");
  ASSERT_FALSE(bool(verify(m)));
  ASSERT_FALSE(bool(bindBatch(m, 5)));
  EXPECT_EQ(toString(y->type()), "f32[5,4,8,8]");
  EXPECT_EQ(*m.batch(), 5);
}

TEST(Builder, ShapeErrorsNameTheNodeAndBothOperands) {
  Module m;
  Builder b(m.main());
  Value *a = b.input("a", TensorType(DType::F32, {2, 3}));
  Value *c = b.input("c", TensorType(DType::F32, {4, 5}));
  auto n = b.tryCreate(Op::MatMul, {a, c}, {}, "mm");
  ASSERT_FALSE(bool(n));
  std::string msg = llvm::toString(n.takeError());
  EXPECT_NE(msg.find("node 'mm' (MatMul)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'a'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'c'"), std::string::npos) << msg;
  EXPECT_EQ(m.main().findNode("mm"), nullptr) << "a failed node must not stay in the graph";
}

TEST(Graph, CreateInferredNodeTypesNamedResultsOrRemovesTheNode) {
  Module m;
  Builder b(m.main());
  Value *a = b.input("a", TensorType(DType::F32, {2, 3}));
  auto ok = createInferredNode(m.main(), Op::Relu, {a}, {"r"}, {}, "relu");
  ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
  EXPECT_EQ((*ok)->result()->name(), "r");
  EXPECT_EQ((*ok)->result()->type(), TensorType(DType::F32, {2, 3}));
  auto twice = createInferredNode(m.main(), Op::Relu, {a}, {"r0", "r1"}, {}, "relu2");
  ASSERT_FALSE(bool(twice));
  EXPECT_NE(llvm::toString(twice.takeError()).find("gives 1 results, expected 2"),
            std::string::npos);
  EXPECT_EQ(m.main().findNode("relu2"), nullptr);
}

TEST(Verifier, CatchesStaleResultTypes) {
  Module m;
  Builder b(m.main());
  Value *a = b.input("a", TensorType(DType::F32, {2, 3}));
  Value *r = b.create(Op::Relu, {a});
  r->setType(TensorType(DType::F32, {3, 2}));
  llvm::Error e = verify(m);
  ASSERT_TRUE(bool(e));
  std::string msg = llvm::toString(std::move(e));
  EXPECT_NE(msg.find("Relu"), std::string::npos) << msg;
}

TEST(Verifier, ALargeGraphReportsItsFirstFaultInGraphOrder) {
  // Large enough to be checked on several threads where the machine has
  // them; the answer is the same either way.
  Module m;
  Builder b(m.main());
  std::vector<Value *> chain{b.input("a", TensorType(DType::F32, {2, 3}))};
  for (int i = 0; i < 20000; ++i) {
    std::string name = "r";
    name += std::to_string(i);
    chain.push_back(b.create(Op::Relu, {chain.back()}, {}, name));
  }
  m.main().addOutput(chain.back());
  auto message = [&] {
    llvm::Error e = verify(m);
    return e ? llvm::toString(std::move(e)) : std::string();
  };
  EXPECT_EQ(message(), "");
  chain[15001]->setType(TensorType(DType::F32, {3, 2})); // r15000
  EXPECT_NE(message().find("'r15000'"), std::string::npos) << message();
  chain[6001]->setType(TensorType(DType::F32, {3, 2})); // r6000, earlier
  EXPECT_NE(message().find("'r6000'"), std::string::npos) << message();
  // An operand used before it is defined, earlier still.
  Node *r3000 = chain[3001]->producer();
  r3000->setOperand(0, chain[19000]);
  EXPECT_NE(message().find("'r3000'"), std::string::npos) << message();
  EXPECT_NE(message().find("used before it is defined"), std::string::npos) << message();
}

TEST(Graph, ReplaceAllUsesAndEraseKeepUseListsConsistent) {
  Module m;
  Builder b(m.main());
  Value *a = b.input("a", TensorType(DType::F32, {2}));
  Value *r = b.create(Op::Relu, {a});
  Value *s = b.create(Op::Add, {r, r});
  m.main().addOutput(s);
  EXPECT_EQ(r->users().size(), 2u);
  Value *t = b.create(Op::Tanh, {a});
  r->replaceAllUsesWith(t);
  EXPECT_FALSE(r->hasUsers());
  EXPECT_EQ(t->users().size(), 2u);
  m.main().erase(r->producer());
  EXPECT_EQ(a->users().size(), 1u);
  // Tanh was appended after Add, which reads it: sorting restores order.
  EXPECT_TRUE(bool(verify(m)));
  EXPECT_TRUE(m.main().sortTopologically());
  EXPECT_FALSE(bool(verify(m)));
}

TEST(OpTable, EveryOpHasANameThatParsesBack) {
  for (unsigned i = 0; i < numOps(); ++i) {
    Op op = (Op)i;
    auto back = parseOp(opName(op));
    ASSERT_TRUE(back.has_value()) << opName(op).str();
    EXPECT_EQ(*back, op);
  }
  EXPECT_FALSE(parseOp("NoSuchOp").has_value());
}

TEST(OpTable, TheConvolutionTraitMarksAConvolutionAndItsGradients) {
  std::vector<std::string> marked;
  for (unsigned i = 0; i < numOps(); ++i)
    if (isConvolution((Op)i))
      marked.push_back(opName((Op)i).str());
  EXPECT_EQ(marked, (std::vector<std::string>{"Conv", "ConvGradData", "ConvGradFilter"}));
}

TEST(Graph, MoveAfterReordersForTheScheduler) {
  Module m;
  Builder b(m.main());
  Value *a = b.input("a", TensorType(DType::F32, {2}));
  Value *x = b.create(Op::Relu, {a});
  Value *y = b.create(Op::Tanh, {a});
  Value *z = b.create(Op::Sigmoid, {x});
  m.main().moveAfter(z->producer(), x->producer());
  std::vector<std::string> order;
  for (Node *n : m.main().nodes())
    order.push_back(n->name());
  EXPECT_EQ(order, (std::vector<std::string>{"a", "Relu", "Sigmoid", "Tanh"}));
  (void)y;
}

TEST(Graph, ManyMovesInOnePassKeepTheGivenOrderAndCarryFollowers) {
  Module m;
  Builder b(m.main());
  Value *a = b.input("a", TensorType(DType::F32, {2}));
  Value *x = b.create(Op::Relu, {a}, {}, "x");
  Value *y = b.create(Op::Tanh, {a}, {}, "y");
  Value *z = b.create(Op::Sigmoid, {x}, {}, "z");
  Value *w = b.create(Op::Neg, {z}, {}, "w");
  Value *v = b.create(Op::Exp, {x}, {}, "v");
  // z and v after x in that order; w after z, so it comes along with z.
  m.main().moveAfter({{z->producer(), x->producer()},
                      {v->producer(), x->producer()},
                      {w->producer(), z->producer()}});
  std::vector<std::string> order;
  for (Node *n : m.main().nodes())
    order.push_back(n->name());
  EXPECT_EQ(order, (std::vector<std::string>{"a", "x", "z", "w", "v", "y"}));
  (void)y;
}

TEST(Graph, NodeAndValueNamesStayFoundThroughEraseAndRename) {
  Module m;
  Graph &g = m.main();
  TensorType t(DType::F32, {2});
  Node *a = g.createNode(Op::Input, {}, {t}, {}, "a");
  // A node whose result carries another node's name: both stay findable.
  Node *b = g.createNodeWithResultNames(Op::Relu, {a->result()}, {t}, {"c"}, {}, "b");
  Node *c = g.createNode(Op::Split, {a->result()}, {t, t}, {}, "c");
  EXPECT_EQ(g.findNode("c"), c);
  EXPECT_EQ(g.findValue("c"), b->result());
  EXPECT_EQ(g.findValue("c:1"), c->result(1));
  EXPECT_EQ(g.uniqueName("c"), "c_1");
  g.erase(c);
  EXPECT_EQ(g.findNode("c"), nullptr);
  EXPECT_EQ(g.findValue("c"), b->result());
  EXPECT_EQ(g.findValue("c:0"), nullptr);
  EXPECT_EQ(g.uniqueName("c"), "c_1");
  g.rename(a, "input");
  EXPECT_EQ(g.findNode("a"), nullptr);
  EXPECT_EQ(g.findValue("a"), nullptr);
  EXPECT_EQ(g.findValue("input"), a->result());
  EXPECT_EQ(a->result()->name(), "input");
  EXPECT_EQ(g.uniqueName("a"), "a");
  g.erase(b);
  EXPECT_EQ(g.findValue("c"), nullptr);
  EXPECT_EQ(g.uniqueName("c"), "c");
  EXPECT_EQ(g.findNode("b"), nullptr);
}
