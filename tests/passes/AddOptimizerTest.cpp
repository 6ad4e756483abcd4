//===- AddOptimizerTest.cpp - add-optimizer: attributes, slots, errors ------===//

#include "PassTestUtil.h"

#include "ir/Verifier.h"
#include "passes/AddOptimizer.h"
#include "passes/autodiff/Autodiff.h"

#include <gtest/gtest.h>

using namespace graphc;
using passtest::addVariable;

namespace {

/// loss = sum(tanh(x·w) + b), differentiated.
std::unique_ptr<Module> differentiated() {
  auto m = std::make_unique<Module>("tiny");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 3}));
  Value *y = b.create(Op::MatMul, {x, addVariable(b, "fc.weight", {3, 4})}, {}, "fc/matmul");
  y = b.create(Op::Add, {b.create(Op::Tanh, {y}), addVariable(b, "fc.bias", {4})}, {}, "fc/add");
  addVariable(b, "fc.unused", {4});
  Attrs a;
  a.set("keepdims", int64_t(0));
  m->main().addOutput(b.create(Op::ReduceSum, {y}, a, "loss"));
  EXPECT_TRUE(bool(differentiate(*m)));
  return m;
}

Node *update(Module &m, llvm::StringRef var) {
  Node *n = m.main().findNode(("update/" + var).str());
  EXPECT_TRUE(n) << var.str();
  return n;
}

void expectSlot(const Module &m, const std::string &name, const TensorType &type) {
  const Variable *v = m.findVariable(name);
  ASSERT_TRUE(v) << name;
  EXPECT_EQ(v->kind, VarKind::Slot);
  EXPECT_EQ(v->type, type);
  EXPECT_EQ(v->init.fn, "zeros");
}

TEST(AddOptimizer, MomentumMatchesTheKernelContract) {
  auto m = differentiated();
  CompileOptions o;
  o.optimizer = "momentum";
  o.momentum = 0.8;
  o.nesterov = true;
  o.weightDecay = 1e-4;
  auto r = addOptimizer(*m, optimizerOptions(o));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  ASSERT_FALSE(bool(verify(*m)));

  Node *lr = m->main().findInput("lr");
  ASSERT_TRUE(lr);
  EXPECT_EQ(lr->result()->type(), TensorType(DType::F32, {}));
  Node *u = update(*m, "fc.weight");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->op(), Op::ApplyMomentum);
  EXPECT_EQ(u->operand(0)->name(), "grad/fc.weight");
  EXPECT_EQ(u->operand(1), lr->result());
  Attrs expected;
  expected.set("var", std::string("fc.weight"));
  expected.set("slots", Strings{"fc.weight.momentum"});
  expected.set("momentum", 0.8);
  expected.set("nesterov", int64_t(1));
  expected.set("weight_decay", 1e-4);
  EXPECT_TRUE(u->attrs() == expected);
  expectSlot(*m, "fc.weight.momentum", TensorType(DType::F32, {3, 4}));
  expectSlot(*m, "fc.bias.momentum", TensorType(DType::F32, {4}));
  EXPECT_FALSE(m->findVariable("fc.unused.momentum")); // no gradient, no update
  EXPECT_FALSE(m->main().findNode("update/fc.unused"));
  EXPECT_EQ(m->plan().optimizer, "momentum");
}

TEST(AddOptimizer, SgdRmspropAdamAttributes) {
  struct Case {
    const char *name;
    Op op;
    Attrs attrs;
  };
  CompileOptions o;
  o.weightDecay = 0.01;
  o.rmspropDecay = 0.95;
  o.rmspropMomentum = 0.5;
  o.rmspropEpsilon = 0.1;
  o.adamBeta1 = 0.85;
  o.adamBeta2 = 0.99;
  o.adamEpsilon = 1e-7;
  Attrs sgd, rms, adam;
  sgd.set("var", std::string("fc.bias"));
  sgd.set("weight_decay", 0.01);
  rms.set("var", std::string("fc.bias"));
  rms.set("slots", Strings{"fc.bias.rms", "fc.bias.momentum"});
  rms.set("decay", 0.95);
  rms.set("momentum", 0.5);
  rms.set("epsilon", 0.1);
  adam.set("var", std::string("fc.bias"));
  adam.set("slots", Strings{"fc.bias.adam_m", "fc.bias.adam_v"});
  adam.set("beta1", 0.85);
  adam.set("beta2", 0.99);
  adam.set("epsilon", 1e-7);
  adam.set("weight_decay", 0.01);
  for (const Case &c : {Case{"sgd", Op::ApplySGD, sgd}, Case{"rmsprop", Op::ApplyRMSProp, rms},
                        Case{"adam", Op::ApplyAdam, adam}}) {
    auto m = differentiated();
    o.optimizer = c.name;
    ASSERT_TRUE(bool(addOptimizer(*m, optimizerOptions(o)))) << c.name;
    ASSERT_FALSE(bool(verify(*m))) << c.name;
    Node *u = update(*m, "fc.bias");
    ASSERT_TRUE(u);
    EXPECT_EQ(u->op(), c.op) << c.name;
    EXPECT_TRUE(u->attrs() == c.attrs) << c.name;
    for (const std::string &slot : c.attrs.getStrings("slots"))
      expectSlot(*m, slot, TensorType(DType::F32, {4}));
  }
}

TEST(AddOptimizer, ReusesAnLrInput) {
  auto m = differentiated();
  Builder(m->main()).input("lr", TensorType(DType::F32, {}));
  ASSERT_TRUE(bool(addOptimizer(*m, {})));
  EXPECT_EQ(m->main().inputs().size(), 2u);
}

std::string errorOf(Module &m, const CompileOptions &o = {}) {
  auto r = addOptimizer(m, optimizerOptions(o));
  return r ? "no error" : llvm::toString(r.takeError());
}

TEST(AddOptimizer, Errors) {
  auto m = differentiated();
  CompileOptions o;
  o.optimizer = "lamb";
  EXPECT_NE(errorOf(*m, o).find("unknown optimizer 'lamb'"), std::string::npos);

  auto none = std::make_unique<Module>("none");
  Builder b(none->main());
  none->main().addOutput(b.input("x", TensorType(DType::F32, {})));
  EXPECT_NE(errorOf(*none).find("run autodiff first"), std::string::npos);

  auto twice = differentiated();
  Attrs a;
  a.set("grad_of", std::string("fc.bias"));
  Builder(twice->main())
      .create(Op::Identity, {twice->main().findValue("grad/fc.bias")}, a, "grad/fc.bias.copy");
  EXPECT_NE(errorOf(*twice).find("has two gradient nodes"), std::string::npos);

  auto taken = differentiated();
  Variable v;
  v.name = "fc.bias.momentum";
  v.type = TensorType(DType::F32, {4});
  taken->addVariable(v);
  EXPECT_NE(errorOf(*taken).find("'fc.bias.momentum'"), std::string::npos);
}

} // namespace
