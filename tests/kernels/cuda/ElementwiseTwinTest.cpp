//===- ElementwiseTwinTest.cpp - Elementwise CUDA kernels vs the CPU ------===//
//
// Binary ops with broadcasting, activation gradients, unary ops, Cast, AddN,
// the comparisons, Not and Where, and the copying ops, on fresh random inputs of odd shapes; each also with
// its result written in place. Exact arithmetic (Add, Sub, Mul, Div, Relu,
// Neg, Cast, copies) must match bit for bit; ops through exp/log/tanh or a
// fused multiply-add on the device within 1e-5 in f32 and one unit in the
// last place in f16 and bf16 (2^-10, 2^-7 relative).
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace graphc {
namespace {

/// The tolerance of an op that is not exact: f32 1e-5, else one 16-bit ulp.
double inexact(DType t) {
  return t == DType::F32 ? 1e-5 : t == DType::F16 ? 1.0 / 1024 : 1.0 / 128;
}

const std::pair<Dims, Dims> kBroadcasts[] = {{{7, 5}, {7, 5}},
                                             {{2, 3, 5, 7}, {3, 1, 1}},
                                             {{1}, {4, 1, 3}},
                                             {{4, 1, 3, 1}, {5, 3, 1}},
                                             {{}, {3}},
                                             {{33, 65}, {1}},
                                             {{0, 3}, {3}},
                                             {{2, 1, 2, 1, 2, 1, 2}, {2, 1, 2, 1}},
                                             {{1000003}, {1000003}},
                                             {{257, 129}, {129}}};

TEST(CudaElementwise, BinaryOpsWithBroadcasting) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(21);
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div})
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32}) {
      if (op == Op::Div && !isFloat(dt))
        continue;
      for (const auto &[sa, sb] : kBroadcasts)
        for (bool swap : {false, true}) {
          OneNode c;
          Dims x = swap ? sb : sa, y = swap ? sa : sb;
          Node *n = c.node(op, {c.input("a", TensorType(dt, x)), c.input("b", TensorType(dt, y))});
          ASSERT_TRUE(n);
          expectTwins(*n,
                      {randomTensor(n->operand(0)->type(), rng, -100, 100),
                       randomTensor(n->operand(1)->type(), rng, 1, 100)},
                      -1);
        }
    }
}

TEST(CudaElementwise, ComparisonsNotAndWhere) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(26);
  for (Op op : {Op::Equal, Op::Less, Op::Greater})
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32})
      for (const auto &[sa, sb] : kBroadcasts) {
        OneNode c;
        Node *n = c.node(op, {c.input("a", TensorType(dt, sa)), c.input("b", TensorType(dt, sb))});
        ASSERT_TRUE(n);
        expectTwins(*n,
                    {smallInts(n->operand(0)->type(), rng), smallInts(n->operand(1)->type(), rng)},
                    -1);
      }
  {
    OneNode c;
    Node *n = c.node(Op::Not, {c.input("a", TensorType(DType::Bool, {100003}))});
    ASSERT_TRUE(n);
    expectTwins(*n, {smallInts(n->operand(0)->type(), rng)}, -1);
  }
  const Dims whereShapes[][3] = {
      {{5}, {5}, {5}}, {{2, 1, 3}, {4, 1}, {3}}, {{}, {2, 3}, {1}}, {{64, 1, 28}, {}, {}}};
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I64})
    for (const auto &s : whereShapes) {
      OneNode c;
      Node *n = c.node(Op::Where, {c.input("c", TensorType(DType::Bool, s[0])),
                                   c.input("a", TensorType(dt, s[1])),
                                   c.input("b", TensorType(dt, s[2]))});
      ASSERT_TRUE(n);
      expectTwins(*n,
                  {smallInts(n->operand(0)->type(), rng),
                   randomTensor(n->operand(1)->type(), rng, -4, 4),
                   randomTensor(n->operand(2)->type(), rng, -4, 4)},
                  -1);
    }
}

TEST(CudaElementwise, ActivationGradients) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(22);
  for (Op op : {Op::ReluGrad, Op::LeakyReluGrad, Op::SigmoidGrad, Op::TanhGrad, Op::ClipGrad,
                Op::ErfGrad, Op::GeluGrad, Op::HardSigmoidGrad, Op::HardSwishGrad})
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (Dims shape : {Dims{1}, Dims{5, 7, 3}, Dims{100003}, Dims{0, 4}}) {
        OneNode c;
        Attrs a;
        a.set("alpha", 0.3);
        a.set("beta", 0.4);
        a.set("min", -0.5);
        a.set("max", 0.25);
        TensorType t(dt, shape);
        Node *n = c.node(op, {c.input("y", t), c.input("dy", t)}, takenBy(op, a));
        ASSERT_TRUE(n);
        bool exact = op == Op::ReluGrad || op == Op::ClipGrad || op == Op::LeakyReluGrad;
        expectTwins(*n, {randomTensor(t, rng), randomTensor(t, rng, -3, 3)},
                    exact ? -1 : inexact(dt));
      }
}

TEST(CudaElementwise, UnaryOps) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(23);
  for (Op op : {Op::Relu, Op::LeakyRelu, Op::Sigmoid, Op::Tanh, Op::Exp, Op::Log, Op::Sqrt, Op::Neg,
                Op::Clip, Op::Erf, Op::Gelu, Op::HardSigmoid, Op::HardSwish})
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (Dims shape : {Dims{}, Dims{3, 37}, Dims{1 << 20}, Dims{2, 0}}) {
        OneNode c;
        Attrs a;
        a.set("alpha", 0.05);
        a.set("min", -1.5);
        a.set("max", 2.0);
        Node *n = c.node(op, {c.input("x", TensorType(dt, shape))}, takenBy(op, a));
        ASSERT_TRUE(n);
        bool positive = op == Op::Log || op == Op::Sqrt;
        bool exact = op == Op::Relu || op == Op::LeakyRelu || op == Op::Neg || op == Op::Clip ||
                     op == Op::Sqrt;
        expectTwins(*n, {randomTensor(n->operand(0)->type(), rng, positive ? 1e-3 : -5, 5)},
                    exact ? -1 : inexact(dt));
      }
  // Integer negation.
  for (DType dt : {DType::I64, DType::I32}) {
    OneNode c;
    Node *n = c.node(Op::Neg, {c.input("x", TensorType(dt, {17, 3}))});
    expectTwins(*n, {randomTensor(n->operand(0)->type(), rng, -1e6, 1e6)}, -1);
  }
}

TEST(CudaElementwise, GeluTanhFormAndItsGradient) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(25);
  Attrs a;
  a.set("approximate", std::string("tanh"));
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    OneNode c;
    TensorType t(dt, {7, 301});
    Node *gelu = c.node(Op::Gelu, {c.input("x", t)}, a);
    Node *grad = c.node(Op::GeluGrad, {c.input("x2", t), c.input("dy", t)}, a);
    ASSERT_TRUE(gelu && grad);
    expectTwins(*gelu, {randomTensor(t, rng, -5, 5)}, inexact(dt));
    expectTwins(*grad, {randomTensor(t, rng, -5, 5), randomTensor(t, rng, -3, 3)}, inexact(dt));
  }
}

TEST(CudaElementwise, CastsBetweenEveryPair) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(24);
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes)
      for (Dims shape : {Dims{129}, Dims{3, 0}}) {
        OneNode c;
        Attrs a;
        a.set("to", to);
        Node *n = c.node(Op::Cast, {c.input("x", TensorType(from, shape))}, a);
        ASSERT_TRUE(n);
        // Within f16's range: a float beyond an integer's range converts
        // differently on x86 and on the GPU (undefined in C++).
        expectTwins(*n, {randomTensor(n->operand(0)->type(), rng, -30000, 30000)}, -1);
      }
}

TEST(CudaElementwise, AddNOfOneToManyOperands) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(25);
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32})
    for (int count : {1, 2, 5, 32, 33, 70}) {
      OneNode c;
      TensorType t(dt, {9, 131});
      std::vector<Value *> in;
      std::vector<Tensor> values;
      for (int i = 0; i < count; ++i) {
        in.push_back(c.input((llvm::Twine("x") + llvm::Twine(i)).str(), t));
        values.push_back(randomTensor(t, rng, -50, 50));
      }
      Node *n = c.node(Op::AddN, in);
      ASSERT_TRUE(n);
      // f32 adds in the CPU's order; 16-bit types round once at the end on
      // both, except past 32 operands where the GPU rounds between groups.
      expectTwins(*n, values, isFloat(dt) && dt != DType::F32 && count > 32 ? inexact(dt) : -1);
    }
}

TEST(CudaElementwise, CopiesConstantsAndVariables) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(26);
  for (DType dt : kAllDTypes) {
    OneNode c;
    TensorType t(dt, {4, 1, 9});
    Value *x = c.input("x", t);
    std::vector<Node *> nodes;
    Attrs reshape, flatten, squeeze, unsqueeze;
    reshape.set("shape", Ints{6, 6});
    flatten.set("axis", int64_t(2));
    squeeze.set("axes", Ints{1});
    unsqueeze.set("axes", Ints{0, 4});
    nodes.push_back(c.node(Op::Identity, {x}, {}, "identity"));
    nodes.push_back(c.node(Op::Transfer, {x}, {}, "transfer"));
    nodes.push_back(c.node(Op::Reshape, {x}, reshape, "reshape"));
    nodes.push_back(c.node(Op::Flatten, {x}, flatten, "flatten"));
    nodes.push_back(c.node(Op::Squeeze, {x}, squeeze, "squeeze"));
    nodes.push_back(c.node(Op::Unsqueeze, {x}, unsqueeze, "unsqueeze"));
    if (isFloat(dt))
      nodes.push_back(c.node(Op::Dropout, {x}, {}, "dropout"));
    Tensor value = randomTensor(t, rng, -9, 9);
    for (Node *n : nodes) {
      ASSERT_TRUE(n);
      expectTwins(*n, {value}, -1);
    }
    Value *k = c.builder().constant(randomTensor(t, rng, -9, 9));
    expectTwins(*k->producer(), {}, -1);

    Variable v;
    v.name = "v";
    v.type = t;
    Node *read = c.variable(v)->producer();
    TensorVariables vars;
    vars.tensors["v"] = randomTensor(t, rng, -9, 9);
    CudaRun run;
    run.variables = &vars;
    auto gpu = runOnCuda(*read, {}, run);
    ASSERT_TRUE((bool)gpu) << llvm::toString(gpu.takeError());
    EXPECT_TRUE(sameBits((*gpu)[0], vars.tensors["v"]));
  }
}

TEST(CudaElementwise, InputsAreNotComputed) {
  SKIP_WITHOUT_CUDA();
  OneNode c;
  Node *in = c.input("x", TensorType(DType::F32, {3}))->producer();
  auto gpu = runOnCuda(*in, {});
  ASSERT_FALSE((bool)gpu);
  EXPECT_NE(llvm::toString(gpu.takeError()).find("fed by the executor"), std::string::npos);
}

} // namespace
} // namespace graphc
