//===- ChannelsLastTwinTest.cpp - NHWC kernels against NCHW, on the GPU ---===//
//
// Every CUDA kernel that takes channels-last tensors (GpuLayoutRules.h), run
// on the GPU in NCHW (--gpu-layout nchw, every tensor plain: the path the
// earlier GPU runs proved) and with its 4-D tensors channels-last, or some
// plain and some channels-last so that the kernel transposes through its
// scratch; inputs go in and results come out plain on the host
// (toChannelsLast, fromChannelsLast). Convolutions compute in NHWC with
// other cuDNN algorithms: the results agree to the sums' rounding (the bounds
// of the twin tests); batch norms sum in another order per layout
// (BatchNormPlan.h): within the sums' rounding, or two units in the last
// place of a 16-bit result; pools, concatenations, splits and casts compute
// the same arithmetic in either layout: bit for bit.
// Skipped ("no CUDA device") where there is no GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "kernels/cuda/ComputeCapability.h"

namespace graphc {
namespace {

constexpr Layout kPlain = Layout::Plain, kCL = Layout::ChannelsLast;

/// What a 16-bit convolution may differ by: four units in the last place
/// of the largest result (the twin tests' bound, MixedPrecisionTwinTest).
double convTolerance(DType t) {
  return t == DType::F16 ? 4.0 / 1024 : t == DType::BF16 ? 4.0 / 128 : 1e-4;
}

/// The layouts of a node's 4-D tensors in one run: all channels-last, all
/// plain, or alternating (the first channels-last).
enum class Mix { AllLast, AllPlain, Alternating };

std::vector<Layout> layoutsOf(llvm::ArrayRef<const Value *> values, Mix mix, unsigned &k) {
  std::vector<Layout> out;
  for (const Value *v : values) {
    bool last =
        v->type().rank() == 4 && (mix == Mix::AllLast || (mix == Mix::Alternating && k++ % 2 == 0));
    out.push_back(last ? kCL : kPlain);
  }
  return out;
}

/// Runs `n` in NCHW and under `policy` with its tensors laid out by `mix`,
/// and compares every result (tol < 0: bit for bit).
void expectLayoutsAgree(const Node &n, llvm::ArrayRef<Tensor> inputs, GpuLayout policy, Mix mix,
                        double tol, const std::string &what) {
  CudaRun nchw;
  auto want = runOnCuda(n, inputs, nchw);
  ASSERT_TRUE(bool(want)) << what << ": " << llvm::toString(want.takeError());
  CudaRun last;
  last.gpuLayout = policy;
  unsigned k = 0;
  std::vector<const Value *> operands(n.operands().begin(), n.operands().end()), results;
  for (auto &r : n.results())
    results.push_back(r.get());
  last.operandLayouts = layoutsOf(operands, mix, k);
  last.resultLayouts = layoutsOf(results, mix, k);
  auto got = runOnCuda(n, inputs, last);
  ASSERT_TRUE(bool(got)) << what << ": " << llvm::toString(got.takeError());
  ASSERT_EQ(got->size(), want->size());
  for (size_t r = 0; r < got->size(); ++r) {
    const std::string at =
        what + " (layouts " + std::to_string((int)mix) + ", result " + std::to_string(r) + ")";
    if (tol < 0)
      EXPECT_TRUE(sameBits((*got)[r], (*want)[r])) << at;
    else
      EXPECT_TRUE(closeTo((*got)[r], (*want)[r], tol)) << at;
  }
}

void convolutions(DType dtype, GpuLayout policy, const std::vector<ConvCase> &cases,
                  std::optional<DType> weights = std::nullopt) {
  std::mt19937 rng(71);
  for (const ConvCase &k : cases)
    for (bool bias : {false, true}) {
      OneNode c;
      ConvNodes n = convNodes(c, k, dtype, bias, weights);
      ASSERT_TRUE(n.conv);
      std::vector<Tensor> values;
      for (Value *v : n.in)
        values.push_back(randomTensor(v->type(), rng));
      const std::string what = dtypeName(dtype).str() + " x " + shapeToString(k.x) + " w " +
                               shapeToString(k.w) + (bias ? " with bias" : "");
      const double tol = convTolerance(dtype);
      for (Mix mix : {Mix::AllLast, Mix::AllPlain, Mix::Alternating}) {
        expectLayoutsAgree(*n.conv, values, policy, mix, tol, what + " forward");
        if (bias)
          continue;
        Tensor dy = randomTensor(n.conv->result()->type(), rng);
        expectLayoutsAgree(*n.data, {dy, values[1]}, policy, mix, tol, what + " data gradient");
        expectLayoutsAgree(*n.filter, {values[0], dy}, policy, mix, tol, what + " filter gradient");
      }
    }
}

TEST(ChannelsLastTwin, F16ConvolutionsAndGradientsAgreeWithNchw) {
  SKIP_WITHOUT_CUDA();
  convolutions(DType::F16, GpuLayout::Auto, sixteenBitConvCases());
}

TEST(ChannelsLastTwin, Bf16ConvolutionsWithF32WeightsAgreeWithNchw) {
  SKIP_WITHOUT_CUDA();
  if (!strictBackend() || !strictBackend()->dtypeRefusal(DType::BF16).empty())
    GTEST_SKIP() << "bf16 needs compute capability 8.0";
  convolutions(DType::BF16, GpuLayout::Auto, sixteenBitConvCases(), DType::F32);
}

TEST(ChannelsLastTwin, F32ConvolutionsUnderNhwcAgreeWithNchw) {
  SKIP_WITHOUT_CUDA();
  convolutions(DType::F32, GpuLayout::Nhwc, convCases());
}

TEST(ChannelsLastTwin, PoolsAndTheirGradientsAreTheNchwOnesBitForBit) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(72);
  for (DType dtype : {DType::F32, DType::F16})
    for (const PoolCase &pc : poolCases()) {
      OneNode c;
      Dims shape{4, 5, 35, 35};
      TensorType xt(dtype, shape);
      Value *x = c.input("x", xt);
      Node *n = c.node(pc.op, {x}, pc.attrs, "pool");
      ASSERT_TRUE(n);
      Tensor xv = randomTensor(xt, rng), dy = randomTensor(n->result()->type(), rng);
      Node *g;
      std::vector<Tensor> gradIn;
      if (pc.op == Op::MaxPool) {
        g = c.node(Op::MaxPoolGrad, {x, c.input("dy", n->result()->type())}, pc.attrs, "grad");
        gradIn = {xv, dy};
      } else {
        Attrs ga = pc.attrs;
        ga.set("input_shape", Ints(shape.begin(), shape.end()));
        g = c.node(Op::AveragePoolGrad, {c.input("dy", n->result()->type())}, ga, "grad");
        gradIn = {dy};
      }
      ASSERT_TRUE(g);
      const std::string what = dtypeName(dtype).str() + " " + pc.what;
      for (Mix mix : {Mix::AllLast, Mix::Alternating}) {
        expectLayoutsAgree(*n, {xv}, GpuLayout::Auto, mix, -1, what);
        expectLayoutsAgree(*g, gradIn, GpuLayout::Auto, mix, -1, what + " gradient");
      }
    }
}

TEST(ChannelsLastTwin, GlobalAveragePoolingOfChannelsLastInput) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(73);
  for (DType dtype : {DType::F32, DType::F16}) {
    OneNode c;
    Node *n = c.node(Op::GlobalAveragePool, {c.input("x", TensorType(dtype, {16, 2048, 8, 8}))});
    ASSERT_TRUE(n);
    // The same terms in the same order; the engine may chunk them otherwise.
    expectLayoutsAgree(*n, {randomTensor(n->operand(0)->type(), rng)}, GpuLayout::Auto,
                       Mix::AllLast, dtype == DType::F32 ? 1e-6 : 1.0 / 1024,
                       dtypeName(dtype).str());
  }
}

TEST(ChannelsLastTwin, ConcatAndSplitAlongChannelsAreStridedCopies) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(74);
  for (int64_t axis : {1, 0, 2, 3}) {
    OneNode c;
    Dims a{4, 64, 7, 5}, b{4, 64, 7, 5};
    b[axis] = axis == 1 ? 96 : 3;
    TensorType at(DType::F16, a), bt(DType::F16, b);
    Attrs attrs;
    attrs.set("axis", axis);
    Node *concat = c.node(Op::Concat, {c.input("a", at), c.input("b", bt)}, attrs, "concat");
    ASSERT_TRUE(concat);
    Attrs split = attrs;
    split.set("split", Ints{a[axis], b[axis]});
    Node *parts = c.node(Op::Split, {c.input("j", concat->result()->type())}, split, "split");
    ASSERT_TRUE(parts);
    const std::string what = "axis " + std::to_string(axis);
    expectLayoutsAgree(*concat, {randomTensor(at, rng), randomTensor(bt, rng)}, GpuLayout::Auto,
                       Mix::AllLast, -1, what);
    expectLayoutsAgree(*parts, {randomTensor(concat->result()->type(), rng)}, GpuLayout::Auto,
                       Mix::AllLast, -1, what);
  }
}

TEST(ChannelsLastTwin, CastsTransposeAndConvertInOnePass) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(75);
  const std::pair<DType, DType> pairs[] = {{DType::F32, DType::F16},
                                           {DType::F16, DType::F32},
                                           {DType::F32, DType::BF16},
                                           {DType::BF16, DType::F32},
                                           {DType::F16, DType::F16}};
  for (const Dims &shape : {Dims{2, 3, 5, 7}, Dims{8, 64, 35, 35}, Dims{3, 33, 1, 1}})
    for (auto [from, to] : pairs) {
      OneNode c;
      Attrs a;
      a.set("to", to);
      Node *n = c.node(Op::Cast, {c.input("x", TensorType(from, shape))}, a);
      ASSERT_TRUE(n);
      Tensor x = randomTensor(n->operand(0)->type(), rng);
      const std::string what =
          dtypeName(from).str() + " -> " + dtypeName(to).str() + " " + shapeToString(shape);
      // A cast to its own type is a copy, which follows its operand.
      expectLayoutsAgree(*n, {x}, GpuLayout::Auto, Mix::AllLast, -1, what);
      if (from == to)
        continue;
      expectLayoutsAgree(*n, {x}, GpuLayout::Auto, Mix::Alternating, -1, what);
      // Against the host's reference, through the kernel alone.
      CudaRun moved;
      moved.resultLayouts = {kCL};
      moved.gpuLayout = GpuLayout::Auto;
      auto got = runOnCuda(*n, {x}, moved);
      auto want = runNode(*n, {x});
      ASSERT_TRUE(got && want) << what;
      EXPECT_TRUE(sameBits((*got)[0], (*want)[0])) << what << ": into channels-last";
    }
}

TEST(ChannelsLastTwin, BatchNormsComputeInTheLayoutOfX) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(76);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    if (dtype == DType::BF16 && !strictBackend()->dtypeRefusal(DType::BF16).empty())
      continue;
    OneNode c;
    BatchNormCase k = batchNormCase(c, {8, 32, 9, 9}, dtype, rng);
    ASSERT_TRUE(k.infer && k.train && k.trainRelu && k.grad);
    auto stats = runOnCuda(*k.train, {k.x, k.scale, k.bias});
    ASSERT_TRUE(bool(stats)) << llvm::toString(stats.takeError());
    Tensor dy = randomTensor(k.x.type(), rng);
    const std::string what = dtypeName(dtype).str();
    // NHWC sums in another order than NCHW (BatchNormPlan.h): a 16-bit
    // result may round to the neighbouring value, two units in the last
    // place of the largest; f32 within both sides' sums.
    const double tol = dtype == DType::F16    ? 0x1p-10
                       : dtype == DType::BF16 ? 0x1p-7
                                              : 2 * sumbound::bound(sumLength(*k.grad) + 4);
    for (Mix mix : {Mix::AllLast, Mix::Alternating}) {
      expectLayoutsAgree(*k.infer, {k.x, k.scale, k.bias, k.mean, k.var}, GpuLayout::Auto, mix, tol,
                         what + " inference");
      expectLayoutsAgree(*k.trainRelu, {k.x, k.scale, k.bias}, GpuLayout::Auto, mix, tol,
                         what + " training with ReLU");
      expectLayoutsAgree(*k.grad, {k.x, k.scale, (*stats)[1], (*stats)[2], dy}, GpuLayout::Auto,
                         mix, tol, what + " gradient");
    }
  }
}

TEST(ChannelsLastTwin, ElementwiseOpsFollowTheirOperands) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(77);
  OneNode c;
  TensorType t(DType::F16, {4, 24, 9, 9});
  Value *a = c.input("a", t), *b = c.input("b", t);
  Node *nodes[] = {c.node(Op::Add, {a, b}), c.node(Op::ReluGrad, {a, b}), c.node(Op::Relu, {a}),
                   c.node(Op::AddN, {a, b, a})};
  Tensor av = randomTensor(t, rng), bv = randomTensor(t, rng);
  for (Node *n : nodes) {
    ASSERT_TRUE(n);
    std::vector<Tensor> in{av, bv, av};
    in.resize(n->numOperands());
    expectLayoutsAgree(*n, in, GpuLayout::Auto, Mix::AllLast, -1, opName(n->op()).str());
  }
}

} // namespace
} // namespace graphc
