// NetBuilder: node names in scopes, variable names in state_dict form, kinds,
// initializers, attributes, and sticky errors.

#include "frontend/models/NetBuilder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace graphc;
using namespace graphc::models;

namespace {

std::string typeOf(const Module &m, llvm::StringRef var) {
  const Variable *v = m.findVariable(var);
  return v ? toString(v->type) : "<missing " + var.str() + ">";
}

} // namespace

TEST(NetBuilder, BasicConvNamesNodesBySlashAndVariablesByDot) {
  Module m;
  NetBuilder nb(m);
  Value *x = nb.input("input", {192, 35, 35});
  Value *y;
  {
    NetBuilder::Scope s(nb, "Mixed_5b");
    y = nb.basicConv(x, 64, 1, {}, "branch1x1");
  }
  nb.output(y);
  ASSERT_FALSE(bool(nb.takeError()));
  ASSERT_FALSE(bool(verify(m)));

  Graph &g = m.main();
  const Node *conv = g.findNode("Mixed_5b/branch1x1/conv");
  const Node *bn = g.findNode("Mixed_5b/branch1x1/bn");
  const Node *relu = g.findNode("Mixed_5b/branch1x1/relu");
  ASSERT_TRUE(conv && bn && relu) << toText(m);
  EXPECT_EQ(conv->op(), Op::Conv);
  EXPECT_EQ(conv->numOperands(), 2u) << "BasicConv2d's conv has no bias";
  EXPECT_EQ(bn->op(), Op::BatchNorm);
  EXPECT_EQ(relu->op(), Op::Relu);
  EXPECT_EQ(y, relu->result());
  EXPECT_EQ(toString(y->type()), "f32[N,64,35,35]");

  // Exactly PyTorch's state_dict, in its order (num_batches_tracked aside).
  std::vector<std::string> names;
  for (const Variable &v : m.variables())
    names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "Mixed_5b.branch1x1.conv.weight", "Mixed_5b.branch1x1.bn.weight",
                       "Mixed_5b.branch1x1.bn.bias", "Mixed_5b.branch1x1.bn.running_mean",
                       "Mixed_5b.branch1x1.bn.running_var"}));
  EXPECT_EQ(typeOf(m, "Mixed_5b.branch1x1.conv.weight"), "f32[64,192,1,1]");
  const Variable *w = m.findVariable("Mixed_5b.branch1x1.bn.weight");
  const Variable *b = m.findVariable("Mixed_5b.branch1x1.bn.bias");
  const Variable *mean = m.findVariable("Mixed_5b.branch1x1.bn.running_mean");
  const Variable *var = m.findVariable("Mixed_5b.branch1x1.bn.running_var");
  EXPECT_EQ(w->kind, VarKind::Param);
  EXPECT_EQ(w->init.fn, "ones");
  EXPECT_EQ(b->kind, VarKind::Param);
  EXPECT_EQ(b->init.fn, "zeros");
  EXPECT_EQ(mean->kind, VarKind::State);
  EXPECT_EQ(mean->init.fn, "zeros");
  EXPECT_EQ(var->kind, VarKind::State);
  EXPECT_EQ(var->init.fn, "ones");

  // BatchNorm(x, scale, bias, mean, var), read in that order.
  ASSERT_EQ(bn->numOperands(), 5u);
  const char *order[] = {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"};
  for (unsigned i = 1; i < 5; ++i)
    EXPECT_EQ(bn->operand(i)->producer()->attrs().getString("var"),
              "Mixed_5b.branch1x1." + std::string(order[i - 1]));
  EXPECT_EQ(bn->attrs().getFloat("epsilon"), 0.001);
  EXPECT_EQ(bn->attrs().getFloat("momentum"), 0.9) << "PyTorch's 0.1 in the ONNX convention";
  EXPECT_EQ(bn->attrs().getInt("training"), 1);
}

TEST(NetBuilder, ConvOptionsReadLikeThePaper) {
  Module m;
  NetBuilder nb(m);
  Value *x = nb.input("input", {3, 299, 299});
  Value *a = nb.basicConv(x, 64, {3, 3}, {.stride = 2, .pad = 1}, "Conv2d_1a_3x3");
  EXPECT_EQ(toString(a->type()), "f32[N,64,150,150]");
  const Node *conv = m.main().findNode("Conv2d_1a_3x3/conv");
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->attrs().getInts("strides"), (Ints{2, 2}));
  EXPECT_EQ(conv->attrs().getInts("pads"), (Ints{1, 1, 1, 1}));

  // An asymmetric kernel with its asymmetric padding keeps the size.
  Value *b = nb.basicConv(a, 32, {1, 7}, {.pad = {0, 3}}, "branch7x7_2");
  EXPECT_EQ(toString(b->type()), "f32[N,32,150,150]");
  EXPECT_EQ(typeOf(m, "branch7x7_2.conv.weight"), "f32[32,64,1,7]");
  EXPECT_EQ(m.main().findNode("branch7x7_2/conv")->attrs().getInts("pads"), (Ints{0, 3, 0, 3}));

  Value *c = nb.conv2d(b, 8, 3, {.dilation = 2, .groups = 4}, "grouped");
  EXPECT_EQ(toString(c->type()), "f32[N,8,146,146]");
  EXPECT_EQ(typeOf(m, "grouped.weight"), "f32[8,8,3,3]");
  EXPECT_EQ(m.main().findNode("grouped")->attrs().getInt("group"), 4);
  ASSERT_FALSE(bool(nb.takeError()));
  EXPECT_FALSE(bool(verify(m)));
}

TEST(NetBuilder, PyTorchDefaultInitializers) {
  Module m;
  NetBuilder nb(m);
  Value *x = nb.input("input", {4, 6, 6});
  x = nb.conv2d(x, 5, 3, {}, "conv");
  x = nb.flatten(x);
  x = nb.linear(x, 7, {}, "fc");
  ASSERT_FALSE(bool(nb.takeError()));

  // kaiming_uniform(a = sqrt 5) for weights, uniform(±1/sqrt(fan_in)) for biases.
  const Variable *cw = m.findVariable("conv.weight"), *cb = m.findVariable("conv.bias");
  const Variable *fw = m.findVariable("fc.weight"), *fb = m.findVariable("fc.bias");
  ASSERT_TRUE(cw && cb && fw && fb);
  EXPECT_EQ(cw->init, (Initializer{"kaiming_uniform", {std::sqrt(5.0)}}));
  double convBound = 1 / std::sqrt(4.0 * 3 * 3);
  EXPECT_EQ(cb->init, (Initializer{"uniform", {-convBound, convBound}}));
  EXPECT_EQ(toString(fw->type), "f32[7,80]") << "nn.Linear stores [out, in]";
  EXPECT_EQ(fw->init, (Initializer{"kaiming_uniform", {std::sqrt(5.0)}}));
  double fcBound = 1 / std::sqrt(80.0);
  EXPECT_EQ(fb->init, (Initializer{"uniform", {-fcBound, fcBound}}));

  const Node *fc = m.main().findNode("fc");
  ASSERT_TRUE(fc);
  EXPECT_EQ(fc->op(), Op::Gemm);
  EXPECT_EQ(fc->attrs().getInt("transB"), 1);
  EXPECT_EQ(toString(fc->result()->type()), "f32[N,7]");
}

TEST(NetBuilder, PoolsConcatAndDropoutCarryTheirAttributes) {
  Module m;
  NetBuilder nb(m);
  Value *x = nb.input("input", {8, 9, 9});
  Value *avg = nb.avgPool(x, 3, 1, 1);
  Value *max = nb.maxPool(x, 3, 1, 1);
  Value *cat = nb.concat({avg, max});
  Value *d = nb.dropout(nb.globalAvgPool(cat, "gap"), 0.25);
  nb.output(d);
  ASSERT_FALSE(bool(nb.takeError()));
  EXPECT_EQ(toString(cat->type()), "f32[N,16,9,9]");
  EXPECT_EQ(toString(d->type()), "f32[N,16,1,1]");
  const Node *ap = avg->producer();
  EXPECT_EQ(ap->attrs().getInt("count_include_pad"), 1) << "F.avg_pool2d's default";
  EXPECT_EQ(ap->attrs().getInts("kernel_shape"), (Ints{3, 3}));
  EXPECT_EQ(d->producer()->op(), Op::Dropout);
  EXPECT_EQ(d->producer()->attrs().getFloat("ratio"), 0.25);
  ASSERT_EQ(m.main().outputs().size(), 1u);
  EXPECT_FALSE(bool(verify(m)));
}

TEST(NetBuilder, TheFirstShapeErrorSticksAndNamesTheNode) {
  Module m;
  NetBuilder nb(m);
  Value *x = nb.input("input", {3, 4, 4});
  Value *y;
  {
    NetBuilder::Scope s(nb, "stem");
    y = nb.basicConv(x, 8, 5, {}, "conv_a"); // 5×5 does not fit 4×4
  }
  EXPECT_TRUE(nb.failed());
  size_t nodes = m.main().numNodes();
  size_t vars = m.variables().size();
  Value *z = nb.maxPool(nb.relu(y), 2, 2);
  z = nb.linear(nb.flatten(z), 10, {}, "fc");
  nb.output(z);
  EXPECT_EQ(m.main().numNodes(), nodes) << "nothing is created after the first error";
  EXPECT_EQ(m.variables().size(), vars);
  EXPECT_TRUE(m.main().outputs().empty());

  llvm::Error e = nb.takeError();
  ASSERT_TRUE(bool(e));
  std::string msg = llvm::toString(std::move(e));
  EXPECT_NE(msg.find("node 'stem/conv_a/conv' (Conv)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not fit"), std::string::npos) << msg;
  EXPECT_FALSE(nb.failed()) << "takeError resets the builder";
}

TEST(NetBuilder, LinearNeedsAFlatInput) {
  Module m;
  NetBuilder nb(m);
  Value *x = nb.input("input", {3, 4, 4});
  nb.linear(x, 10, {}, "fc");
  std::string msg = llvm::toString(nb.takeError());
  EXPECT_NE(msg.find("layer 'fc'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[N, features]"), std::string::npos) << msg;
}
