//===- Bf16TwinTest.cpp - bf16 layers on the GPU against the CPU's --------===//
//
// What `--precision bf16` runs on a GPU, against the CPU kernels that run
// the same plan on CPUs (and on emulated GPUs): cuDNN's bf16 convolutions
// over f32 weights and bias (narrowed in the kernel, as oneDNN's reorder
// narrows them) and their gradients, the filter gradient f32 as the plan
// asks; bf16 batch norms (f32 statistics), pools and global pooling. The
// CPU side computes in oneDNN's bf16 kernels, the GPU side in cuDNN's or in
// our f32 kernels between a widening and a rounding.
//
// Tolerances follow the arithmetic (tests/common/SumBound.h): each side's
// f32 sums of the node's longest sum K (as the f32 twins: twice (K + 4)·u),
// plus one bf16 unit in the last place (2·2^-8 of the largest value) for
// each rounding to bf16 whose input may differ between the two sides: the
// result's own, and where the GPU rounds more often than oneDNN (a Conv's
// f32 bias added after the rounded sum, an f32 filter gradient that cuDNN
// writes in bf16), and for a pooling gradient each window over an element
// beyond the first (oneDNN's reference kernel, which takes dilated windows,
// adds each window's share to a bf16 gradient: measured here). The cases
// are built and run on every CPU with bf16 instructions (skipped elsewhere); the
// GPU half skips ("no CUDA device") where there is none, and needs compute
// capability 8.0 where there is one.
//
// So that the bounds are checked where no GPU is, every case also runs a
// model of the GPU's arithmetic on the CPU (gpuModel: the f32 CPU kernel
// between the GPU kernel's widening and roundings) against oneDNN's bf16
// kernels, within the same bound. The model is not the GPU (cuDNN sums in
// its own order, which the f32 twins bound); it shows that the roundings the
// bound counts are all that separate the two paths' designs.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "kernels/cpu/CpuBackend.h"

namespace graphc {
namespace {

// The CPU side computes in oneDNN's bf16 kernels, which a CPU without bf16
// instructions (or capped below them: GRAPHC_CPU_ISA=avx2) does not have.
#define SKIP_WITHOUT_CPU_BF16()                                                                    \
  do {                                                                                             \
    if (!cpuHasBf16())                                                                             \
      GTEST_SKIP() << "no bf16 instructions on this CPU for the CPU side of the twins";            \
  } while (0)

/// Both sides' f32 sums plus `roundings` bf16 roundings apart.
double bf16Bound(const Node &n, int roundings) {
  return 2 * sumbound::bound(sumLength(n) + 4) + sumbound::bound(0, sumbound::kBf16, roundings);
}

/// f32 values rounded to bf16 and back.
Tensor throughBf16(const Tensor &t) {
  return sumbound::convertedTo(sumbound::convertedTo(t, DType::BF16), DType::F32);
}

/// What the CUDA kernels compute for a bf16 node, modelled with the CPU's
/// f32 kernel: bf16 operands widened (exactly); a convolution's f32 weights
/// and bias narrowed to bf16 first (Conv.cpp); the f32 node; bf16 results
/// rounded once; a Conv's bias added to its rounded sum and rounded again;
/// an f32 filter gradient rounded to bf16 (cuDNN writes it in bf16).
std::vector<Tensor> gpuModel(const Node &n, llvm::ArrayRef<Tensor> inputs) {
  const bool conv = isConvolution(n.op());
  const bool bias = n.op() == Op::Conv && n.numOperands() == 3;
  OneNode c;
  std::vector<Value *> operands;
  std::vector<Tensor> values;
  for (unsigned i = 0; i < (bias ? 2u : n.numOperands()); ++i) {
    const Tensor &v = inputs[i];
    operands.push_back(c.input("in" + std::to_string(i), TensorType(DType::F32, v.type().shape)));
    values.push_back(v.dtype() == DType::BF16 ? sumbound::convertedTo(v, DType::F32)
                     : conv                   ? throughBf16(v)
                                              : v.clone());
  }
  Node *f32 = c.node(n.op(), operands, n.attrs(), "f32");
  if (!f32)
    return {};
  auto out = runNode(*f32, values);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return {};
  }
  std::vector<Tensor> results;
  for (unsigned r = 0; r < n.numResults(); ++r) {
    Tensor y = std::move((*out)[r]);
    if (bias) {
      y = throughBf16(y);
      Tensor b = throughBf16(inputs[2]);
      const int64_t channels = y.type().shape[1], plane = y.type().shape[2] * y.type().shape[3];
      for (int64_t i = 0; i < y.numElements(); ++i)
        y.set(i, (float)((float)y.at(i) + (float)b.at((i / plane) % channels)));
    }
    if (n.result(r)->type().dtype == DType::BF16)
      y = sumbound::convertedTo(y, DType::BF16);
    else if (conv)
      y = throughBf16(y);
    results.push_back(std::move(y));
  }
  return results;
}

/// Adds the case, and checks the CPU's model of the GPU against the CPU now;
/// the CPU's results, or null (a failure recorded) when the CPU refuses `n`.
const std::vector<Tensor> *addCase(TwinCases &t, const Node *n, std::vector<Tensor> inputs,
                                   double tol, const std::string &what = "") {
  std::vector<Tensor> model = gpuModel(*n, inputs);
  const std::vector<Tensor> *added = t.add(n, std::move(inputs), tol, what);
  if (!added)
    return nullptr;
  const std::vector<Tensor> &cpu = *added;
  EXPECT_EQ(model.size(), cpu.size()) << opName(n->op()).str();
  if (model.size() != cpu.size())
    return added;
  for (size_t r = 0; r < cpu.size(); ++r) {
    const std::string label =
        "model " + opName(n->op()).str() + " result " + std::to_string(r) + " " + what;
    if (tol < 0) {
      EXPECT_TRUE(sameBits(model[r], cpu[r])) << label;
      continue;
    }
    EXPECT_TRUE(closeTo(model[r], cpu[r], tol)) << label;
    sumbound::report(label, relativeError(model[r], cpu[r]), tol);
  }
  return added;
}

TEST(CudaBf16, ConvolutionsOverF32WeightsAndTheirGradients) {
  SKIP_WITHOUT_CPU_BF16();
  std::mt19937 rng(71);
  TwinCases t;
  for (const ConvCase &k : sixteenBitConvCases())
    for (bool bias : {false, true}) {
      ConvNodes n = convNodes(t.graph(), k, DType::BF16, bias, DType::F32);
      ASSERT_TRUE(n.conv);
      std::vector<Tensor> values;
      for (Value *v : n.in)
        values.push_back(randomTensor(v->type(), rng));
      const std::string what = "x " + shapeToString(k.x) + " w " + shapeToString(k.w);
      // With a bias the GPU rounds the sum, the bias and their sum; oneDNN
      // adds the f32 bias before its one rounding.
      const std::vector<Tensor> *y =
          addCase(t, n.conv, values, bf16Bound(*n.conv, bias ? 3 : 1), what);
      ASSERT_TRUE(y);
      ASSERT_EQ((*y)[0].type().dtype, DType::BF16);
      if (bias)
        continue;
      ASSERT_TRUE(n.data && n.filter);
      Tensor dy = randomTensor(n.conv->result()->type(), rng);
      addCase(t, n.data, {dy, values[1]}, bf16Bound(*n.data, 1), what);
      // f32 on the CPU without a rounding; rounded to bf16 once on the GPU.
      const std::vector<Tensor> *dw =
          addCase(t, n.filter, {values[0], dy}, bf16Bound(*n.filter, 1), what);
      ASSERT_TRUE(dw);
      ASSERT_EQ((*dw)[0].type().dtype, DType::F32);
    }
  t.compareOnGpu();
}

TEST(CudaBf16, BatchNormsAndPools) {
  SKIP_WITHOUT_CPU_BF16();
  std::mt19937 rng(72);
  TwinCases t;
  for (Dims shape : {Dims{8, 5, 6, 7}, Dims{32, 64, 17, 17}, Dims{0, 3, 4, 4}}) {
    BatchNormCase k = batchNormCase(t.graph(), shape, DType::BF16, rng);
    ASSERT_TRUE(k.infer && k.train && k.trainRelu && k.grad);
    addCase(t, k.infer, {k.x, k.scale, k.bias, k.mean, k.var}, bf16Bound(*k.infer, 1));
    addCase(t, k.trainRelu, {k.x, k.scale, k.bias}, bf16Bound(*k.trainRelu, 1));
    const std::vector<Tensor> *train =
        addCase(t, k.train, {k.x, k.scale, k.bias}, bf16Bound(*k.train, 1));
    ASSERT_TRUE(train);
    std::vector<Tensor> stats = *train;
    ASSERT_EQ(stats.size(), 3u);
    EXPECT_EQ(stats[0].type().dtype, DType::BF16);
    EXPECT_EQ(stats[1].type().dtype, DType::F32); // statistics stay f32
    addCase(t, k.grad, {k.x, k.scale, stats[1], stats[2], randomTensor(k.x.type(), rng)},
            bf16Bound(*k.grad, 1));
  }
  for (const PoolCase &pc : poolCases()) {
    // oneDNN's bf16 average pooling cannot count padding past the input
    // (ceil_mode): the CPU refuses it, so there is nothing to compare.
    if (pc.includePad && pc.attrs.getInt("ceil_mode", 0))
      continue;
    OneNode &c = t.graph();
    Dims shape{4, 5, 35, 35};
    TensorType xt(DType::BF16, shape);
    Value *x = c.input("x", xt);
    Node *n = c.node(pc.op, {x}, pc.attrs, "pool");
    ASSERT_TRUE(n);
    Tensor xv = randomTensor(xt, rng);
    // The maximum of bf16 values is one of them: the same bits.
    addCase(t, n, {xv}, pc.op == Op::MaxPool ? -1 : bf16Bound(*n, 1), pc.what);
    Tensor dy = randomTensor(n->result()->type(), rng);
    if (pc.op == Op::MaxPool) {
      Node *g = c.node(Op::MaxPoolGrad, {x, c.input("dy", n->result()->type())}, pc.attrs, "grad");
      ASSERT_TRUE(g);
      addCase(t, g, {xv, dy}, bf16Bound(*g, sumbound::windowsPerElement(pc.attrs)), pc.what);
    } else {
      Attrs ga = pc.attrs;
      ga.set("input_shape", Ints(shape.begin(), shape.end()));
      Node *g = c.node(Op::AveragePoolGrad, {c.input("dy", n->result()->type())}, ga, "grad");
      ASSERT_TRUE(g);
      addCase(t, g, {dy}, bf16Bound(*g, sumbound::windowsPerElement(pc.attrs)), pc.what);
    }
  }
  OneNode &c = t.graph();
  Node *n =
      c.node(Op::GlobalAveragePool, {c.input("x", TensorType(DType::BF16, {16, 2048, 8, 8}))});
  ASSERT_TRUE(n);
  addCase(t, n, {randomTensor(n->operand(0)->type(), rng)}, bf16Bound(*n, 1));
  t.compareOnGpu();
}

} // namespace
} // namespace graphc
