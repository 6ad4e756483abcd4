//===- EmulationTest.cpp - The device bodies, run on the host -------------===//
//
// No GPU needed: the per-element functions the CUDA kernels run (the
// GRAPHC_HD bodies of kernels/cuda/*Device.h) and the parameters the kernels
// derive from a node (KernelPlans.h, ReduceHost.h, ...) are run here in plain
// loops, one iteration per CUDA thread's element, and compared with the CPU
// kernels. Where the arithmetic is the same, the comparison is bit for bit
// (copies, casts, broadcasting, dropout masks, optimizer updates); where the
// order of a sum differs, 1e-6 relative. What this cannot show: that the
// launches, shared memory and library calls around these bodies are right;
// the GPU tests check those.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "kernels/DropoutKey.h"
#include "kernels/LoopNest.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/ElementwiseDevice.h"
#include "kernels/cuda/KernelPlans.h"
#include "kernels/cuda/OptimizerDevice.h"
#include "kernels/cuda/ReduceHost.h"

#include <cmath>
#include <limits>

namespace graphc {
namespace {

using namespace cuda;

/// The CPU result of a node (fails the test on an error).
std::vector<Tensor> cpuRun(const Node &n, llvm::ArrayRef<Tensor> in, uint64_t step = 0,
                           uint64_t seed = 0, TensorVariables *vars = nullptr) {
  auto out = runNode(n, in, vars, step, seed);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return {};
  }
  return std::move(*out);
}

template <typename F> void visitStorage(DType t, F &&f) {
  switch (t) {
  case DType::F16:
    return f(Half{});
  case DType::BF16:
    return f(BFloat{});
  case DType::I64:
    return f(int64_t{});
  case DType::I32:
    return f(int32_t{});
  case DType::Bool:
    return f(Bool8{});
  default:
    return f(float{});
  }
}

//===-- Elementwise --------------------------------------------------------===//

struct BinaryCase {
  Op op;
  BinaryOp device;
};

TEST(Emulation, BinaryOpsWithBroadcastingMatchBitForBit) {
  std::mt19937 rng(1);
  const BinaryCase ops[] = {{Op::Add, BinaryOp::Add},
                            {Op::Sub, BinaryOp::Sub},
                            {Op::Mul, BinaryOp::Mul},
                            {Op::Div, BinaryOp::Div},
                            {Op::ReluGrad, BinaryOp::ReluGrad},
                            {Op::LeakyReluGrad, BinaryOp::LeakyReluGrad},
                            {Op::SigmoidGrad, BinaryOp::SigmoidGrad},
                            {Op::TanhGrad, BinaryOp::TanhGrad},
                            {Op::ClipGrad, BinaryOp::ClipGrad},
                            {Op::ErfGrad, BinaryOp::ErfGrad},
                            {Op::GeluGrad, BinaryOp::GeluGrad},
                            {Op::HardSigmoidGrad, BinaryOp::HardSigmoidGrad},
                            {Op::HardSwishGrad, BinaryOp::HardSwishGrad}};
  const std::pair<Dims, Dims> shapes[] = {{{7, 5}, {7, 5}}, {{2, 3, 5, 7}, {3, 1, 1}},
                                          {{1}, {4, 1, 3}}, {{4, 1, 3, 1}, {5, 3, 1}},
                                          {{}, {3}},        {{2, 1, 2, 1, 2, 1, 2}, {2, 1, 2, 1}},
                                          {{0, 3}, {3}},    {{129}, {1}}};
  for (const BinaryCase &bc : ops)
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32})
      for (const auto &[sa, sb] : shapes) {
        bool gradient = bc.device >= BinaryOp::ReluGrad;
        if (!isFloat(dt) && bc.device > BinaryOp::Mul)
          continue;
        if (gradient && sa != sb)
          continue;
        OneNode c;
        Attrs a;
        a.set("alpha", 0.2);
        a.set("min", -0.3);
        a.set("max", 0.4);
        Node *n =
            c.node(bc.op, {c.input("a", TensorType(dt, sa)), c.input("b", TensorType(dt, sb))},
                   takenBy(bc.op, a));
        ASSERT_TRUE(n);
        Tensor x = randomTensor(n->operand(0)->type(), rng, -4, 4);
        Tensor y = randomTensor(n->operand(1)->type(), rng, 0.5, 4); // no division by zero
        std::vector<Tensor> want = cpuRun(*n, {x, y});
        ASSERT_EQ(want.size(), 1u);
        Tensor got(n->result()->type());
        auto index = broadcastIndex2(*n, got.shape(), sa, sb);
        ASSERT_TRUE((bool)index) << llvm::toString(index.takeError());
        ElemParams p;
        p.alpha = 0.2f;
        p.beta = 0.5f; // HardSigmoid's default
        p.lo = -0.3f;
        p.hi = 0.4f;
        visitStorage(dt, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (!std::is_same_v<T, Bool8>) {
            for (int64_t i = 0; i < got.numElements(); ++i) {
              int64_t off[2];
              index->offsets(i, off);
              got.data<T>()[i] =
                  binaryElement(bc.device, x.data<T>()[off[0]], y.data<T>()[off[1]], p);
            }
          }
        });
        EXPECT_TRUE(sameBits(got, want[0])) << opName(bc.op).str() << " " << dtypeName(dt).str()
                                            << " " << shapeToString(sa) << " " << shapeToString(sb);
      }
}

TEST(Emulation, ComparisonsNotAndWhereMatchBitForBit) {
  std::mt19937 rng(5);
  const std::pair<Op, CompareOp> compares[] = {{Op::Equal, CompareOp::Equal},
                                               {Op::Less, CompareOp::Less},
                                               {Op::Greater, CompareOp::Greater}};
  const std::pair<Dims, Dims> shapes[] = {
      {{7, 5}, {7, 5}}, {{2, 3, 5, 7}, {3, 1, 1}}, {{1}, {4, 1, 3}}, {{}, {3}}, {{0, 3}, {3}}};
  for (const auto &[op, device] : compares)
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32})
      for (const auto &[sa, sb] : shapes) {
        OneNode c;
        Node *n = c.node(op, {c.input("a", TensorType(dt, sa)), c.input("b", TensorType(dt, sb))});
        ASSERT_TRUE(n);
        Tensor x = smallInts(n->operand(0)->type(), rng), y = smallInts(n->operand(1)->type(), rng);
        std::vector<Tensor> want = cpuRun(*n, {x, y});
        ASSERT_EQ(want.size(), 1u);
        Tensor got(n->result()->type());
        auto index = broadcastIndex2(*n, got.shape(), sa, sb);
        ASSERT_TRUE((bool)index) << llvm::toString(index.takeError());
        visitStorage(dt, [&](auto tag) {
          using T = decltype(tag);
          for (int64_t i = 0; i < got.numElements(); ++i) {
            int64_t off[2];
            index->offsets(i, off);
            got.data<Bool8>()[i] = compareElement(device, x.data<T>()[off[0]], y.data<T>()[off[1]]);
          }
        });
        EXPECT_TRUE(sameBits(got, want[0])) << opName(op).str() << " " << dtypeName(dt).str() << " "
                                            << shapeToString(sa) << " " << shapeToString(sb);
      }

  {
    OneNode c;
    Node *n = c.node(Op::Not, {c.input("a", TensorType(DType::Bool, {5, 3}))});
    ASSERT_TRUE(n);
    Tensor x = smallInts(n->operand(0)->type(), rng);
    std::vector<Tensor> want = cpuRun(*n, {x});
    ASSERT_EQ(want.size(), 1u);
    Tensor got(n->result()->type());
    for (int64_t i = 0; i < got.numElements(); ++i)
      got.data<Bool8>()[i] = notElement(x.data<Bool8>()[i]);
    EXPECT_TRUE(sameBits(got, want[0]));
  }

  const Dims whereShapes[][3] = {
      {{5}, {5}, {5}}, {{2, 1, 3}, {4, 1}, {3}}, {{}, {2, 3}, {1}}, {{4, 1}, {}, {}}};
  for (DType dt : {DType::F32, DType::F16, DType::I64})
    for (const auto &s : whereShapes) {
      OneNode c;
      Node *n = c.node(Op::Where,
                       {c.input("c", TensorType(DType::Bool, s[0])),
                        c.input("a", TensorType(dt, s[1])), c.input("b", TensorType(dt, s[2]))});
      ASSERT_TRUE(n);
      Tensor cond = smallInts(n->operand(0)->type(), rng);
      Tensor x = randomTensor(n->operand(1)->type(), rng, -4, 4);
      Tensor y = randomTensor(n->operand(2)->type(), rng, -4, 4);
      std::vector<Tensor> want = cpuRun(*n, {cond, x, y});
      ASSERT_EQ(want.size(), 1u);
      Tensor got(n->result()->type());
      auto index = toStridedIndex<3>(
          *n, plain::broadcastNest(got.shape(), {Dims(s[0]), Dims(s[1]), Dims(s[2])}));
      ASSERT_TRUE((bool)index) << llvm::toString(index.takeError());
      visitStorage(dt, [&](auto tag) {
        using T = decltype(tag);
        for (int64_t i = 0; i < got.numElements(); ++i) {
          int64_t off[3];
          index->offsets(i, off);
          got.data<T>()[i] =
              whereElement(cond.data<Bool8>()[off[0]], x.data<T>()[off[1]], y.data<T>()[off[2]]);
        }
      });
      EXPECT_TRUE(sameBits(got, want[0])) << dtypeName(dt).str() << " " << shapeToString(s[1]);
    }
}

TEST(Emulation, UnaryOpsMatchBitForBit) {
  std::mt19937 rng(2);
  const std::pair<Op, UnaryOp> ops[] = {{Op::Relu, UnaryOp::Relu},
                                        {Op::LeakyRelu, UnaryOp::LeakyRelu},
                                        {Op::Sigmoid, UnaryOp::Sigmoid},
                                        {Op::Tanh, UnaryOp::Tanh},
                                        {Op::Exp, UnaryOp::Exp},
                                        {Op::Log, UnaryOp::Log},
                                        {Op::Sqrt, UnaryOp::Sqrt},
                                        {Op::Neg, UnaryOp::Neg},
                                        {Op::Clip, UnaryOp::Clip},
                                        {Op::Erf, UnaryOp::Erf},
                                        {Op::Gelu, UnaryOp::Gelu},
                                        {Op::HardSigmoid, UnaryOp::HardSigmoid},
                                        {Op::HardSwish, UnaryOp::HardSwish}};
  for (auto [op, device] : ops)
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      OneNode c;
      Attrs a;
      a.set("alpha", 0.1);
      a.set("min", -0.5);
      Node *n = c.node(op, {c.input("x", TensorType(dt, {3, 37}))}, takenBy(op, a));
      ASSERT_TRUE(n);
      bool positive = op == Op::Log || op == Op::Sqrt;
      Tensor x = randomTensor(n->operand(0)->type(), rng, positive ? 0.01 : -3, 3);
      std::vector<Tensor> want = cpuRun(*n, {x});
      Tensor got(n->result()->type());
      ElemParams p;
      p.alpha = 0.1f;
      p.beta = 0.5f; // HardSigmoid's default
      p.lo = -0.5f;
      p.hi = std::numeric_limits<float>::infinity();
      visitStorage(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, Bool8>)
          for (int64_t i = 0; i < x.numElements(); ++i)
            got.data<T>()[i] = unaryElement(device, x.data<T>()[i], p);
      });
      EXPECT_TRUE(sameBits(got, want[0])) << opName(op).str() << " " << dtypeName(dt).str();
    }
}

TEST(Emulation, GeluTanhFormAndItsGradientMatchBitForBit) {
  std::mt19937 rng(4);
  Attrs a;
  a.set("approximate", std::string("tanh"));
  ElemParams p;
  p.tanh = true;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    OneNode c;
    TensorType t(dt, {5, 41});
    Node *gelu = c.node(Op::Gelu, {c.input("x", t)}, a);
    Node *grad = c.node(Op::GeluGrad, {c.input("x2", t), c.input("dy", t)}, a);
    ASSERT_TRUE(gelu && grad);
    Tensor x = randomTensor(t, rng, -5, 5), dy = randomTensor(t, rng, -2, 2);
    std::vector<Tensor> wantY = cpuRun(*gelu, {x}), wantDx = cpuRun(*grad, {x, dy});
    Tensor y(t), dx(t);
    visitStorage(dt, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                    std::is_same_v<T, BFloat>)
        for (int64_t i = 0; i < x.numElements(); ++i) {
          y.data<T>()[i] = unaryElement(UnaryOp::Gelu, x.data<T>()[i], p);
          dx.data<T>()[i] = binaryElement(BinaryOp::GeluGrad, x.data<T>()[i], dy.data<T>()[i], p);
        }
    });
    EXPECT_TRUE(sameBits(y, wantY[0])) << dtypeName(dt).str();
    EXPECT_TRUE(sameBits(dx, wantDx[0])) << dtypeName(dt).str();
  }
}

TEST(Emulation, CastsBetweenEveryPairMatchBitForBit) {
  std::mt19937 rng(3);
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      OneNode c;
      Attrs a;
      a.set("to", to);
      Node *n = c.node(Op::Cast, {c.input("x", TensorType(from, {67}))}, a);
      ASSERT_TRUE(n);
      Tensor x = randomTensor(n->operand(0)->type(), rng, -300, 300);
      if (from == DType::Bool)
        for (int64_t i = 0; i < 67; ++i)
          x.data<uint8_t>()[i] = (uint8_t)(i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 7);
      std::vector<Tensor> want = cpuRun(*n, {x});
      // A cast to the same dtype is a copy on both devices (a bool keeps
      // its byte); the others convert element by element.
      Tensor got = from == to ? x.clone() : Tensor(n->result()->type());
      if (from != to)
        visitStorage(from, [&](auto fromTag) {
          using From = decltype(fromTag);
          visitStorage(to, [&](auto toTag) {
            using To = decltype(toTag);
            for (int64_t i = 0; i < 67; ++i)
              got.data<To>()[i] = convertElement<To>(x.data<From>()[i]);
          });
        });
      EXPECT_TRUE(sameBits(got, want[0])) << dtypeName(from).str() << " -> " << dtypeName(to).str();
    }
}

//===-- Data movement ------------------------------------------------------===//

/// Copies through a strided index, elements of any size.
Tensor stridedCopy(const Tensor &in, const TensorType &outType, const StridedIndex<1> &index) {
  Tensor out(outType);
  size_t es = dtypeSize(outType.dtype);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    int64_t off;
    index.offsets(i, &off);
    std::memcpy(static_cast<char *>(out.raw()) + i * es,
                static_cast<const char *>(in.raw()) + off * es, es);
  }
  return out;
}

TEST(Emulation, TransposeSliceExpandMatchBitForBit) {
  std::mt19937 rng(4);
  struct Case {
    Op op;
    Dims shape;
    Attrs attrs;
  };
  std::vector<Case> cases;
  auto attrs = [](std::initializer_list<std::pair<const char *, Ints>> kv) {
    Attrs a;
    for (auto &[k, v] : kv)
      a.set(k, v);
    return a;
  };
  cases.push_back({Op::Transpose, {2, 3, 4, 5}, attrs({{"perm", {0, 2, 3, 1}}})});
  cases.push_back({Op::Transpose, {3, 1, 7}, {}});
  cases.push_back({Op::Transpose, {2, 2, 2, 2, 2, 2, 2}, attrs({{"perm", {6, 0, 5, 1, 4, 2, 3}}})});
  cases.push_back({Op::Slice,
                   {9, 8, 7},
                   attrs({{"starts", {1, -1, 0}}, {"ends", {8, -9, 7}}, {"steps", {2, -3, 1}}})});
  cases.push_back({Op::Slice, {10, 5}, attrs({{"starts", {2}}, {"ends", {100}}, {"axes", {1}}})});
  cases.push_back({Op::Slice, {10, 5}, attrs({{"starts", {5}}, {"ends", {5}}})});
  cases.push_back({Op::Expand, {3, 1, 5}, attrs({{"shape", {2, 3, 4, 5}}})});
  cases.push_back({Op::Expand, {1}, attrs({{"shape", {6}}})});
  for (const Case &k : cases)
    for (DType dt : {DType::F32, DType::F16, DType::I64, DType::Bool}) {
      OneNode c;
      Node *n = c.node(k.op, {c.input("x", TensorType(dt, k.shape))}, k.attrs);
      ASSERT_TRUE(n);
      Tensor x = randomTensor(n->operand(0)->type(), rng, -50, 50);
      std::vector<Tensor> want = cpuRun(*n, {x});
      auto index = stridedCopyIndex(*n);
      ASSERT_TRUE((bool)index) << llvm::toString(index.takeError());
      EXPECT_TRUE(sameBits(stridedCopy(x, n->result()->type(), *index), want[0]))
          << opName(k.op).str() << " " << shapeToString(k.shape) << " " << dtypeName(dt).str();
    }
}

TEST(Emulation, PadInEveryModeMatchesBitForBit) {
  std::mt19937 rng(5);
  const std::pair<Dims, Ints> cases[] = {{{3, 4}, {1, 2, 2, 0}},
                                         {{2, 3, 5}, {0, 3, 4, 1, 5, 0}},
                                         {{1, 1, 4, 4}, {0, 0, 3, 3, 0, 0, 3, 3}},
                                         {{6}, {-2, 1}},
                                         {{1}, {3, 2}}};
  for (const char *mode : {"constant", "reflect", "edge"})
    for (const auto &[shape, pads] : cases)
      for (DType dt : {DType::F32, DType::BF16, DType::I32}) {
        OneNode c;
        Attrs a;
        a.set("pads", pads);
        a.set("mode", std::string(mode));
        a.set("value", 2.5);
        Node *n = c.node(Op::Pad, {c.input("x", TensorType(dt, shape))}, a);
        ASSERT_TRUE(n);
        Tensor x = randomTensor(n->operand(0)->type(), rng, -9, 9);
        std::vector<Tensor> want = cpuRun(*n, {x});
        auto p = padParams(*n);
        ASSERT_TRUE((bool)p) << llvm::toString(p.takeError());
        Tensor got(n->result()->type());
        size_t es = dtypeSize(dt);
        for (int64_t i = 0; i < got.numElements(); ++i) {
          int64_t from = padSourceOffset(*p, i);
          std::memcpy(static_cast<char *>(got.raw()) + i * es,
                      from < 0 ? static_cast<const void *>(&p->fill)
                               : static_cast<const char *>(x.raw()) + from * es,
                      es);
        }
        EXPECT_TRUE(sameBits(got, want[0]))
            << mode << " " << shapeToString(shape) << " " << dtypeName(dt).str();
      }
}

TEST(Emulation, GatherAndItsGradientMatchBitForBit) {
  std::mt19937 rng(6);
  for (int64_t axis : {0, 1, -1})
    for (DType it : {DType::I64, DType::I32}) {
      OneNode c;
      Attrs a;
      a.set("axis", axis);
      TensorType data(DType::F32, {5, 6, 3});
      int64_t dim = data.dim(axis);
      Node *n = c.node(Op::Gather, {c.input("d", data), c.input("i", TensorType(it, {2, 4}))}, a);
      ASSERT_TRUE(n);
      Tensor x = randomTensor(data, rng);
      Tensor idx(TensorType(it, {2, 4}));
      for (int64_t k = 0; k < 8; ++k)
        idx.set(k, (double)((int64_t)(k * 7) % (2 * dim) - dim)); // negatives and repeats
      std::vector<Tensor> want = cpuRun(*n, {x, idx});
      GatherParams p = gatherParams(*n);
      Tensor got(n->result()->type());
      for (int64_t e = 0; e < got.numElements(); ++e) {
        int64_t j, from;
        gatherSource(p, idx.raw(), e, j, from);
        ASSERT_GE(from, 0);
        got.data<float>()[e] = x.data<float>()[from];
      }
      EXPECT_TRUE(sameBits(got, want[0])) << "axis " << axis;

      Attrs ga;
      ga.set("axis", axis);
      ga.set("data_shape", Ints(data.shape.begin(), data.shape.end()));
      Node *g =
          c.node(Op::GatherGrad, {n->operand(1), c.input("dy", n->result()->type())}, ga, "g");
      ASSERT_TRUE(g);
      Tensor dy = randomTensor(n->result()->type(), rng);
      std::vector<Tensor> wantDx = cpuRun(*g, {idx, dy});
      GatherParams gp = gatherParams(*g);
      Tensor dx(data);
      // One thread per (row, column), indices in order: Shape.cu's loop.
      for (int64_t w = 0; w < gp.pre * gp.post; ++w) {
        int64_t row = w / gp.post, col = w % gp.post;
        for (int64_t j = 0; j < gp.count; ++j) {
          int64_t at = normalizeIndex(readIndex(idx.raw(), gp.wideIndices, j), gp.dim);
          dx.data<float>()[(row * gp.dim + at) * gp.post + col] +=
              dy.data<float>()[(row * gp.count + j) * gp.post + col];
        }
      }
      EXPECT_TRUE(sameBits(dx, wantDx[0])) << "gradient, axis " << axis;
    }
  EXPECT_EQ(normalizeIndex(5, 5), -1);
  EXPECT_EQ(normalizeIndex(-6, 5), -1);
  EXPECT_EQ(normalizeIndex(-5, 5), 0);
}

//===-- Pooling ------------------------------------------------------------===//

TEST(Emulation, PoolingAndItsGradientsMatch) {
  // Also on values with many ties (multiples of 1/2 in [-1, 1]): the first
  // maximum in window order takes the gradient, as on the CPU.
  std::mt19937 rng(7);
  for (const PoolCase &pc : poolCases())
    for (bool ties : {false, true}) {
      Op op = pc.op;
      const Attrs &a = pc.attrs;
      const std::string what = pc.what + (ties ? " with ties" : "");
      OneNode c;
      TensorType xt(DType::F32, {2, 3, 9, 8});
      Value *xv = c.input("x", xt);
      Node *n = c.node(op, {xv}, a, "pool");
      ASSERT_TRUE(n);
      Tensor x = randomTensor(xt, rng);
      if (ties)
        for (int64_t i = 0; i < x.numElements(); ++i)
          x.set(i, std::round(x.at(i) * 2) / 2);
      std::vector<Tensor> want = cpuRun(*n, {x});
      auto p = poolParams(*n);
      ASSERT_TRUE((bool)p) << llvm::toString(p.takeError());
      Tensor got(n->result()->type());
      for (int64_t e = 0; e < got.numElements(); ++e)
        got.data<float>()[e] = poolForwardAt(*p, x.data<float>(), e);
      if (op == Op::MaxPool)
        EXPECT_TRUE(sameBits(got, want[0])) << what;
      else
        EXPECT_TRUE(closeTo(got, want[0], 1e-6)) << what;

      Tensor dy = randomTensor(n->result()->type(), rng);
      Node *g;
      std::vector<Tensor> wantDx;
      if (op == Op::MaxPool) {
        g = c.node(Op::MaxPoolGrad, {xv, c.input("dy", n->result()->type())}, a, "grad");
        ASSERT_TRUE(g);
        wantDx = cpuRun(*g, {x, dy});
      } else {
        Attrs ga = a;
        ga.set("input_shape", Ints(xt.shape.begin(), xt.shape.end()));
        g = c.node(Op::AveragePoolGrad, {c.input("dy", n->result()->type())}, ga, "grad");
        ASSERT_TRUE(g);
        wantDx = cpuRun(*g, {dy});
      }
      auto gp = poolParams(*g);
      ASSERT_TRUE((bool)gp) << llvm::toString(gp.takeError());
      // MaxPoolGrad's two passes: every window's argmax, then the gather.
      std::vector<int> argmax;
      if (op == Op::MaxPool)
        for (int64_t e = 0; e < gp->planes * gp->oh * gp->ow; ++e)
          argmax.push_back(poolArgMaxAt(*gp, x.data<float>(), e));
      Tensor dx(xt);
      for (int64_t e = 0; e < dx.numElements(); ++e)
        dx.data<float>()[e] =
            poolBackwardAt(*gp, argmax.empty() ? nullptr : argmax.data(), dy.data<float>(), e);
      EXPECT_TRUE(closeTo(dx, wantDx[0], 1e-6)) << what << " gradient";
    }
}

//===-- Reductions and batch norm ------------------------------------------===//

/// The engine's sums as Reduce.cu forms them (chunks, then chunks in order;
/// within a chunk the order differs on the device, which only rounds).
void emulateReduce(const ReducePlan &plan, const ReduceArgs &a, float *out) {
  for (int64_t o = 0; o < plan.outputs; ++o) {
    int64_t keptOffset;
    a.kept.offsets(o, &keptOffset);
    double total = 0;
    for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
      double acc = 0;
      int64_t begin = chunk * plan.chunkLen;
      for (int64_t r = begin; r < std::min(plan.count, begin + plan.chunkLen); ++r)
        acc += reduceTerm(a, o, keptOffset, r);
      total += acc;
    }
    out[o] = (float)(total * a.scale);
  }
}

TEST(Emulation, ReductionsOverAnyAxesMatch) {
  std::mt19937 rng(8);
  const std::pair<Dims, Ints> cases[] = {
      {{4, 5, 6}, {1}},       {{4, 5, 6}, {0, 2}}, {{4, 5, 6}, {}},   {{3, 1, 7}, {-1}},
      {{2, 3, 4, 5}, {1, 3}}, {{1000, 3}, {0}},    {{3, 70000}, {1}}, {{2, 0, 3}, {2}}};
  for (Op op : {Op::ReduceSum, Op::ReduceMean})
    for (const auto &[shape, axes] : cases)
      for (int keep : {0, 1}) {
        OneNode c;
        Attrs a;
        a.set("axes", axes);
        a.set("keepdims", int64_t(keep));
        Node *n = c.node(op, {c.input("x", TensorType(DType::F32, shape))}, a);
        ASSERT_TRUE(n);
        Tensor x = randomTensor(n->operand(0)->type(), rng);
        std::vector<Tensor> want = cpuRun(*n, {x});
        llvm::SmallVector<bool, 6> reduced(shape.size(), axes.empty());
        for (int64_t ax : axes)
          reduced[ax < 0 ? ax + (int64_t)shape.size() : ax] = true;
        ReductionGeometry g = reductionGeometry(shape, reduced);
        ReduceArgs args;
        ASSERT_TRUE(g.toIndices(args.kept, args.reduced));
        args.x = x.data<float>();
        args.scale = op == Op::ReduceMean && g.count ? 1.0 / (double)g.count : 1.0;
        ReducePlan plan = planReduction(g.outputs, g.count, g.innerReduced);
        Tensor got(n->result()->type());
        ASSERT_EQ(got.numElements(), plan.outputs);
        if (g.count)
          emulateReduce(plan, args, got.data<float>());
        else
          for (int64_t o = 0; o < plan.outputs; ++o)
            got.data<float>()[o] = op == Op::ReduceMean ? NAN : 0.0f;
        EXPECT_TRUE(closeTo(got, want[0], 1e-6))
            << opName(op).str() << " " << shapeToString(shape) << " axes " << shapeToString(axes);
      }
}

//===-- Training -----------------------------------------------------------===//


/// Dropout.cu's mask draws: a stream per block of kMaskBlock values; value i
/// takes half i % 2 of its block's draw i / 2. Calls f(i, the value).
template <typename F>
void forEachMaskValue(const DropoutParams &p, uint64_t stepKey, int64_t count, F &&f) {
  for (int64_t b = 0; b * kMaskBlock < count; ++b) {
    Xoshiro stream = maskStream(p, stepKey, b);
    uint64_t draw = 0;
    for (int64_t e = 0; e < std::min(kMaskBlock, count - b * kMaskBlock); ++e) {
      if (e % 2 == 0)
        draw = stream.next();
      f(b * kMaskBlock + e, maskValue(p, draw, (int)(e & 1)));
    }
  }
}

TEST(Emulation, DropoutMasksAreTheCpuMasksBitForBit) {
  std::mt19937 rng(10);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t size : {1, 7, 4096, 4097, 3 * 4096 + 513})
      for (double ratio : {0.0, 0.3, 0.5, 1.0})
        for (int tower : {-1, 2}) {
          OneNode c;
          c.builder().setTower(tower);
          Attrs a;
          a.set("ratio", ratio);
          a.set("seed", int64_t(11));
          Node *n = c.node(Op::DropoutTrain, {c.input("x", TensorType(dt, {size}))}, a,
                           tower < 0 ? "drop" : "tower_2/drop");
          ASSERT_TRUE(n);
          Tensor x = randomTensor(n->operand(0)->type(), rng);
          for (uint64_t step : {0, 5})
            for (bool fromCounter : {false, true}) {
              std::vector<Tensor> want = cpuRun(*n, {x}, step, /*seed=*/1234);
              DropoutParams p = dropoutParams(*n, 1234, step);
              // Under an executor the kernel reads the step from the device's
              // counter (here a host copy the body reads), not the argument.
              DeviceStep counter{step, 0};
              if (fromCounter) {
                p.counter = &counter;
                p.step = DeviceStep{step + 17, 3};
              }
              const uint64_t stepKey = maskStepKey(p.nodeKey, maskStep(p));
              Tensor y(n->result()->type()), mask(n->result()->type());
              visitStorage(dt, [&](auto tag) {
                using T = decltype(tag);
                if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                              std::is_same_v<T, BFloat>) {
                  forEachMaskValue(p, stepKey, size, [&](int64_t i, float m) {
                    y.data<T>()[i] = fromFloat<T>(toFloat(x.data<T>()[i]) * m);
                    mask.data<T>()[i] = fromFloat<T>(m);
                  });
                }
              });
              EXPECT_TRUE(sameBits(y, want[0])) << dtypeName(dt).str() << " " << size;
              EXPECT_TRUE(sameBits(mask, want[1])) << dtypeName(dt).str() << " " << size;
            }
        }
}

TEST(Emulation, PerSampleDropoutIsTheCpuResultBitForBit) {
  // Dropout.cu's per-sample path: the mask's N values drawn as an element
  // mask of N elements (dropoutKernel, mask only), then samplesKernel: y[i] =
  // x[i] * sampleScale(mask[i / inner]), the stored value mapped back to the
  // float scale.
  std::mt19937 rng(13);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t samples : {1, 2, 7, 4097})
      for (const char *kind : {"sample", "tensor"})
        for (double ratio : {0.0, 0.3, 0.9, 1.0}) {
          OneNode c;
          c.builder().setTower(1);
          Attrs a;
          a.set("ratio", ratio);
          a.set("seed", int64_t(5));
          a.set("mask", std::string(kind));
          Node *n = c.node(Op::DropoutTrain, {c.input("x", TensorType(dt, {samples, 3, 5}))}, a,
                           "tower_1/drop_path");
          ASSERT_TRUE(n);
          Tensor x = randomTensor(n->operand(0)->type(), rng);
          const uint64_t step = 3;
          std::vector<Tensor> want = cpuRun(*n, {x}, step, /*seed=*/99);
          DropoutParams p = dropoutParams(*n, 99, step);
          const uint64_t stepKey = maskStepKey(p.nodeKey, maskStep(p));
          Tensor y(n->result(0)->type()), mask(n->result(1)->type());
          int64_t values = mask.numElements(), inner = x.numElements() / values;
          visitStorage(dt, [&](auto tag) {
            using T = decltype(tag);
            if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                          std::is_same_v<T, BFloat>) {
              forEachMaskValue(p, stepKey, values,
                               [&](int64_t i, float m) { mask.data<T>()[i] = fromFloat<T>(m); });
              for (int64_t i = 0; i < x.numElements(); ++i)
                y.data<T>()[i] = fromFloat<T>(toFloat(x.data<T>()[i]) *
                                              sampleScale(p, toFloat(mask.data<T>()[i / inner])));
            }
          });
          EXPECT_TRUE(sameBits(mask, want[1])) << dtypeName(dt).str() << " " << samples << kind;
          EXPECT_TRUE(sameBits(y, want[0])) << dtypeName(dt).str() << " " << samples << kind;
        }
}

TEST(Emulation, TheDeviceDerivesTheCpuStepKey) {
  // The key the device derives from its step counter is dropoutStepKey's for
  // every step and micro-batch, so the counter path draws the CPU's masks
  // under gradient accumulation too.
  std::mt19937_64 rng(12);
  for (int i = 0; i < 1000; ++i) {
    uint64_t node = rng(), step = i < 500 ? (uint64_t)i : rng(), micro = (uint64_t)(i % 7);
    ASSERT_EQ(maskStepKey(node, DeviceStep{step, micro}), dropoutStepKey(node, step, micro))
        << node << " " << step << " " << micro;
  }
  // Each of the three moves the key.
  uint64_t k = maskStepKey(5, DeviceStep{3, 0});
  EXPECT_NE(k, maskStepKey(6, DeviceStep{3, 0}));
  EXPECT_NE(k, maskStepKey(5, DeviceStep{4, 0}));
  EXPECT_NE(k, maskStepKey(5, DeviceStep{3, 1}));
}

TEST(Emulation, OptimizerUpdatesMatchBitForBit) {
  std::mt19937 rng(11);
  for (const UpdateCase &k : updateCases()) {
    const UpdateRule rule = updateRuleOf(k.op);
    OneNode c;
    TensorType t(DType::F32, {5, 13});
    Strings slots;
    for (int s = 0; s < k.slots; ++s) {
      Variable v;
      v.name = "slot" + std::to_string(s);
      v.type = t;
      v.kind = VarKind::Slot;
      c.module().addVariable(v);
      slots.push_back(v.name);
    }
    Variable p;
    p.name = "w";
    p.type = t;
    c.module().addVariable(p);
    Attrs a = k.attrs;
    a.set("var", std::string("w"));
    a.set("slots", slots);
    Node *n = c.node(k.op, {c.input("g", t), c.input("lr", TensorType(DType::F32, {}))}, a);
    ASSERT_TRUE(n);
    Tensor g = randomTensor(t, rng), lr = Tensor::scalar(0.05f);
    TensorVariables vars;
    vars.tensors["w"] = randomTensor(t, rng);
    for (const std::string &s : slots)
      vars.tensors[s] = randomTensor(t, rng, 0, 1);
    TensorVariables before;
    for (auto &e : vars.tensors)
      before.tensors[e.first()] = e.second.clone();
    uint64_t step = 3;
    cpuRun(*n, {g, lr}, step, 0, &vars);

    // The CUDA kernel's hyper-parameters and element loop.
    auto kernelOnHost = [&]() -> UpdateHyper {
      UpdateHyper h;
      const Attrs &at = n->attrs();
      h.wd = (float)at.getFloat("weight_decay", 0);
      h.momentum = (float)at.getFloat("momentum", rule == UpdateRule::RMSProp ? 0.0 : 0.9);
      h.nesterov = at.getInt("nesterov", 0) != 0;
      h.decay = (float)at.getFloat("decay", 0.9);
      h.restOfDecay = (float)(1 - at.getFloat("decay", 0.9));
      h.eps = (float)at.getFloat("epsilon", rule == UpdateRule::RMSProp ? 1e-10 : 1e-8);
      double b1 = at.getFloat("beta1", 0.9), b2 = at.getFloat("beta2", 0.999);
      h.beta1 = (float)b1;
      h.beta2 = (float)b2;
      h.rest1 = (float)(1 - b1);
      h.rest2 = (float)(1 - b2);
      h.adamBias1 = 1 - std::pow(b1, (double)step + 1);
      h.invRootBias2 = (float)(1 / std::sqrt(1 - std::pow(b2, (double)step + 1)));
      return h;
    };
    UpdateHyper h = kernelOnHost();
    float *pw = before.tensors["w"].data<float>();
    float *s0 = k.slots > 0 ? before.tensors["slot0"].data<float>() : nullptr;
    float *s1 = k.slots > 1 ? before.tensors["slot1"].data<float>() : nullptr;
    for (int64_t i = 0; i < t.numElements(); ++i)
      updateElement(rule, h, 0.05f, pw + i, s0 ? s0 + i : nullptr, s1 ? s1 + i : nullptr,
                    g.data<float>()[i]);
    for (auto &e : vars.tensors)
      EXPECT_TRUE(sameBits(before.tensors[e.first()], e.second))
          << opName(k.op).str() << " " << e.first().str();
  }
}

} // namespace
} // namespace graphc
