//===- BatchNormTwinTest.cpp - The CUDA batch norms vs the CPU's ----------===//
//
// Every CUDA batch-norm kernel (BatchNorm.cpp) against kernels/cpu's: f32,
// f16 and bf16 data read and written as they are (bf16 where the CPU has
// bf16 instructions for its side), NCHW and channels-last (every tensor of
// x's shape NHWC, and x NHWC with dy and dx plain, which transposes through
// scratch), inference, training with and without the fused ReLU, the
// gradient, and the ReLU-masked gradient (sixth operand y) against the CPU's
// gradient of dy masked where y <= 0. Odd channel counts and spatial sizes
// (no 16-byte chunks), inception_v3's, an empty batch. Tolerances: f32, both
// sides' f32 sums, 2 (K + 4)·u; f16, 4/1024 (as the other f16 twins); bf16,
// the sums plus one bf16 rounding (Bf16TwinTest.cpp). Built and checked on
// the CPU everywhere; the GPU half skips without a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "kernels/cpu/CpuBackend.h"

namespace graphc {
namespace {

constexpr Layout kCL = Layout::ChannelsLast, kPlain = Layout::Plain;

double toleranceFor(const Node &n, DType t) {
  const double sums = 2 * sumbound::bound(sumLength(n) + 4);
  if (t == DType::F16)
    return 4.0 / 1024;
  if (t == DType::BF16)
    return sums + sumbound::bound(0, sumbound::kBf16, 1);
  return sums;
}

/// dy where y > 0, zero elsewhere (the fused ReLU's mask), in dy's type.
Tensor masked(const Tensor &dy, const Tensor &y) {
  Tensor out = dy.clone();
  for (int64_t i = 0; i < dy.numElements(); ++i)
    if (!(y.at(i) > 0))
      out.set(i, 0);
  return out;
}

/// The layouts of a node's tensors: those of x's shape per `data`, `grad`
/// (dy and dx, the gradient's), channel vectors plain.
CudaRun layouts(const Node &n, Layout data, Layout grad) {
  const bool gradient = n.op() == Op::BatchNormTrainGrad;
  CudaRun run;
  run.gpuLayout = GpuLayout::Nhwc;
  for (unsigned i = 0; i < n.numOperands(); ++i)
    run.operandLayouts.push_back(i == 0 || (gradient && i == 5) ? data
                                 : gradient && i == 4           ? grad
                                                                : kPlain);
  run.resultLayouts.assign(n.numResults(), kPlain);
  run.resultLayouts[0] = gradient ? grad : data;
  return run;
}

void batchNorms(DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  TwinCases t;
  for (Dims shape : {Dims{8, 32, 9, 9}, Dims{4, 64, 17, 17}, Dims{2, 80, 9, 9}, Dims{3, 5, 7, 7},
                     Dims{2, 288, 8, 8}, Dims{16, 3}, Dims{1, 4, 3, 2, 2}, Dims{0, 8, 4, 4}}) {
    OneNode &c = t.graph();
    BatchNormCase k = batchNormCase(c, shape, dtype, rng);
    ASSERT_TRUE(k.infer && k.train && k.trainRelu && k.grad);
    Attrs relu;
    relu.set("epsilon", 1e-3);
    relu.set("activation", std::string("relu"));
    Value *y = c.input("y", k.x.type());
    Node *fused = c.node(Op::BatchNormTrainGrad,
                         {k.grad->operand(0), k.grad->operand(1), k.grad->operand(2),
                          k.grad->operand(3), k.grad->operand(4), y},
                         relu, "bn_grad_relu");
    ASSERT_TRUE(fused);
    auto stats = runNode(*k.trainRelu, {k.x, k.scale, k.bias});
    ASSERT_TRUE(bool(stats)) << llvm::toString(stats.takeError());
    Tensor dy = randomTensor(k.x.type(), rng);
    std::vector<Tensor> gradIn{k.x, k.scale, (*stats)[1], (*stats)[2], dy};
    auto want = runNode(*k.grad, {k.x, k.scale, (*stats)[1], (*stats)[2], masked(dy, (*stats)[0])});
    ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
    std::vector<Tensor> fusedIn = gradIn;
    fusedIn.push_back((*stats)[0]);

    const bool fourD = shape.size() == 4 && shape[0] > 0;
    for (auto [data, grad] :
         {std::pair{kPlain, kPlain}, std::pair{kCL, kCL}, std::pair{kCL, kPlain}}) {
      if (!fourD && data == kCL)
        continue;
      const std::string what = dtypeName(dtype).str() + " " + shapeToString(shape) +
                               (data == kCL ? " NHWC" : " NCHW") +
                               (grad != data ? ", dy and dx plain" : "");
      if (grad == data) {
        t.add(k.infer, {k.x, k.scale, k.bias, k.mean, k.var}, toleranceFor(*k.infer, dtype), what,
              layouts(*k.infer, data, grad));
        t.add(k.train, {k.x, k.scale, k.bias}, toleranceFor(*k.train, dtype), what,
              layouts(*k.train, data, grad));
        t.add(k.trainRelu, {k.x, k.scale, k.bias}, toleranceFor(*k.trainRelu, dtype), what,
              layouts(*k.trainRelu, data, grad));
      }
      t.add(k.grad, gradIn, toleranceFor(*k.grad, dtype), what, layouts(*k.grad, data, grad));
      t.expect(fused, fusedIn, *want, toleranceFor(*k.grad, dtype), what + ", ReLU mask",
               layouts(*fused, data, grad));
    }
  }
  t.compareOnGpu();
}

TEST(BatchNormTwin, F32) {
  batchNorms(DType::F32, 81);
}

TEST(BatchNormTwin, F16) {
  batchNorms(DType::F16, 82);
}

TEST(BatchNormTwin, Bf16) {
  if (!cpuHasBf16())
    GTEST_SKIP() << "no bf16 instructions on this CPU for the CPU side of the twins";
  if (cudaDeviceAvailable() && !strictBackend()->dtypeRefusal(DType::BF16).empty())
    GTEST_SKIP() << "bf16 needs compute capability 8.0";
  batchNorms(DType::BF16, 83);
}

TEST(BatchNormTwin, RepeatedRunsAreTheSameBits) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(84);
  for (Layout data : {kPlain, kCL}) {
    OneNode c;
    BatchNormCase k = batchNormCase(c, {16, 64, 35, 35}, DType::F16, rng);
    ASSERT_TRUE(k.train && k.grad);
    CudaRun run = layouts(*k.train, data, data);
    auto first = runOnCuda(*k.train, {k.x, k.scale, k.bias}, run);
    auto second = runOnCuda(*k.train, {k.x, k.scale, k.bias}, run);
    ASSERT_TRUE(first && second);
    for (size_t r = 0; r < first->size(); ++r)
      EXPECT_TRUE(sameBits((*first)[r], (*second)[r])) << "result " << r;
    std::vector<Tensor> in{k.x, k.scale, (*first)[1], (*first)[2], randomTensor(k.x.type(), rng)};
    CudaRun g = layouts(*k.grad, data, data);
    auto a = runOnCuda(*k.grad, in, g), b = runOnCuda(*k.grad, in, g);
    ASSERT_TRUE(a && b);
    for (size_t r = 0; r < a->size(); ++r)
      EXPECT_TRUE(sameBits((*a)[r], (*b)[r])) << "gradient result " << r;
  }
}

} // namespace
} // namespace graphc
