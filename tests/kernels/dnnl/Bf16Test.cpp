//===- Bf16Test.cpp - The oneDNN kernels in bf16 (--precision bf16) --------===//
//
// Each oneDNN kernel that takes nChw<B>c, built for bf16 data (batch norms'
// channel vectors stay f32), against the f32 kernel on the same bf16-rounded
// inputs: the f32 kernels are checked against PyTorch (ReferenceTest.cpp), so
// this bounds what bf16 adds: its results' rounding, u = 2^-8 relative,
// besides both kernels' float32 sums in orders of their own (bf16Bound). In
// every layout combination the kernel takes, blocked and (the layout bf16
// takes on AMX, forced here) channels-last.
// Skipped on a CPU without bf16 instructions (or under ONEDNN_MAX_CPU_ISA
// below them), where oneDNN 2.6 lacks some bf16 primitives and graphrun
// refuses --precision bf16.
//
//===----------------------------------------------------------------------===//

#include "SumBound.h"
#include "tests/kernels/dnnl/DnnlTestUtil.h"

#include "kernels/cpu/CpuBackend.h"

using namespace graphc;
using namespace graphc::test;

namespace {

/// A bf16 kernel against the f32 one on the same values: u_bf16 for each bf16
/// rounding on the way to a result (the result's own; f32 weights a mixed
/// convolution rounds to bf16; a pooling gradient's overlapping windows
/// adding up in its bf16 output, sumbound::windowsPerElement of them), and twice the
/// sums' rounding bound (kernelBound).
double bf16Bound(const Node &n, DType result) {
  int roundings = result == DType::BF16;
  if ((n.op() == Op::Conv || n.op() == Op::ConvGradData) &&
      n.operand(1)->type().dtype == DType::F32 && n.operand(0)->type().dtype == DType::BF16)
    ++roundings;
  if ((n.op() == Op::MaxPoolGrad || n.op() == Op::AveragePoolGrad) && result == DType::BF16)
    roundings += sumbound::windowsPerElement(n.attrs()) - 1;
  return roundings * sumbound::kBf16 + kernelBound(n, {}, 2);
}

/// Which operands of `op` are data (bf16 in mixed precision); the others are
/// batch-norm channel vectors, which stay f32.
bool isData(Op op, unsigned i) {
  switch (op) {
  case Op::BatchNorm:
  case Op::BatchNormTrain:
    return i == 0;
  case Op::BatchNormTrainGrad:
    return i == 0 || i == 4;
  default:
    return true;
  }
}

/// Every case in bf16 against f32 under `policy` (blocked, or channels-last:
/// the layout bf16 takes on AMX).
void kernelsMatchF32(CpuLayout policy) {
  std::mt19937 rng(11);
  for (const Case &c : blockedCases()) {
    SCOPED_TRACE(c.name);
    std::vector<TensorType> low;
    std::vector<Tensor> in32, in16;
    for (unsigned i = 0; i < c.inputs.size(); ++i) {
      Tensor t = randomTensor(c.inputs[i], rng);
      bool variance =
          (c.op == Op::BatchNorm && i == 4) || (c.op == Op::BatchNormTrainGrad && i == 3);
      for (int64_t k = 0; variance && k < t.numElements(); ++k)
        t.set(k, std::abs(t.at(k)) + 0.5);
      DType dt = isData(c.op, i) ? DType::BF16 : DType::F32;
      in16.push_back(sumbound::convertedTo(t, dt));
      in32.push_back(sumbound::convertedTo(in16.back(), DType::F32)); // the same values, rounded
      low.push_back(TensorType(dt, c.inputs[i].shape));
    }
    auto node32 = mustMakeNode(c.op, c.inputs, c.attrs);
    auto node16 = makeNode(c.op, low, c.attrs);
    ASSERT_TRUE(bool(node16)) << llvm::toString(node16.takeError());
    const Node &n = *(*node16)->node;
    auto probe = KernelHarness::create(n, std::nullopt, ConvAlgorithm::Auto, policy);
    if (!probe) {
      // Average pooling whose windows overhang the padded input corrects
      // PyTorch's divisors in f32 only, and says so.
      std::string msg = llvm::toString(probe.takeError());
      EXPECT_TRUE(c.op == Op::AveragePool || c.op == Op::AveragePoolGrad) << msg;
      EXPECT_NE(msg.find("f32 only"), std::string::npos) << msg;
      continue;
    }
    EXPECT_EQ(n.result(0)->type().dtype, DType::BF16);
    std::vector<Tensor> want = runOnce(*node32->node, in32);
    for (const LayoutPair &layouts : layoutCombinations((*probe)->kernel(), n)) {
      auto h = KernelHarness::create(n, layouts, ConvAlgorithm::Auto, policy);
      ASSERT_TRUE(bool(h)) << llvm::toString(h.takeError());
      auto got = (*h)->run(in16);
      ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
      for (size_t r = 0; r < want.size(); ++r) {
        // bf16 results carry 8 bits; f32 ones (statistics, dscale, dbias)
        // are sums over bf16 data.
        double worst = 0, bound = bf16Bound(n, (*got)[r].type().dtype);
        EXPECT_TRUE(near(sumbound::convertedTo((*got)[r], DType::F32), want[r], bound, &worst))
            << "result " << r;
        sumbound::report("bf16 " + opName(c.op).str() + " result " + std::to_string(r), worst,
                         bound);
        EXPECT_EQ((*got)[r].type().dtype, n.result(r)->type().dtype);
      }
    }
  }
}

TEST(DnnlBf16, KernelsMatchF32OnTheSameInputs) {
  if (!cpuHasBf16())
    GTEST_SKIP() << "no bf16 instructions here";
  kernelsMatchF32(CpuLayout::Blocked);
}

TEST(DnnlBf16, ChannelsLastKernelsMatchF32OnTheSameInputs) {
  if (!cpuHasBf16())
    GTEST_SKIP() << "no bf16 instructions here";
  kernelsMatchF32(CpuLayout::Nhwc);
}

TEST(DnnlBf16, ConvolutionsTakeF32WeightsAndGiveF32FilterGradients) {
  // Mixed precision's convolutions: bf16 data, f32 weights and bias read as
  // they are, and the filter gradient written in f32.
  if (!cpuHasBf16())
    GTEST_SKIP() << "no bf16 instructions here";
  std::mt19937 rng(5);
  TensorType x = f32({2, 32, 7, 7}), y = f32({2, 16, 7, 7}), w = f32({16, 32, 3, 3}), b = f32({16});
  auto bf = [](const TensorType &t) { return TensorType(DType::BF16, t.shape); };
  Attrs conv = attrs({{"pads", Ints{1, 1, 1, 1}}});
  Attrs data = conv, filter = conv, filterF32 = conv;
  data.set("input_shape", Ints{2, 32, 7, 7});
  filter.set("filter_shape", Ints{16, 32, 3, 3});
  filterF32 = filter;
  filterF32.set("to", DType::F32);
  struct Mixed {
    Op op;
    std::vector<TensorType> f32Types, mixedTypes;
    Attrs f32Attrs, mixedAttrs;
  } cases[] = {
      {Op::Conv, {x, w, b}, {bf(x), w, b}, conv, conv},
      {Op::ConvGradData, {y, w}, {bf(y), w}, data, data},
      {Op::ConvGradFilter, {x, y}, {bf(x), bf(y)}, filter, filterF32},
  };
  for (const Mixed &c : cases) {
    SCOPED_TRACE(opName(c.op).str());
    std::vector<Tensor> in16, in32;
    for (const TensorType &t : c.mixedTypes) {
      in16.push_back(sumbound::convertedTo(randomTensor(f32(t.shape), rng), t.dtype));
      in32.push_back(sumbound::convertedTo(in16.back(), DType::F32));
    }
    auto node32 = mustMakeNode(c.op, c.f32Types, c.f32Attrs);
    auto node16 = mustMakeNode(c.op, c.mixedTypes, c.mixedAttrs);
    DType want = c.op == Op::ConvGradFilter ? DType::F32 : DType::BF16;
    EXPECT_EQ(node16->node->result(0)->type().dtype, want);
    auto got = runOnce(*node16->node, in16);
    EXPECT_EQ(got[0].type().dtype, want);
    double worst = 0, bound = bf16Bound(*node16->node, want);
    EXPECT_TRUE(near(sumbound::convertedTo(got[0], DType::F32), runOnce(*node32->node, in32)[0],
                     bound, &worst));
    sumbound::report("mixed " + opName(c.op).str(), worst, bound);
  }
}

TEST(DnnlBf16, ConvolutionGradientsAccumulateBeyondBf16) {
  if (!cpuHasBf16())
    GTEST_SKIP() << "no bf16 instructions here";
  // A filter gradient sums N*H*W products: 2*64*64 here. Summed in bf16 it
  // would lose everything past 8 bits; oneDNN accumulates in f32 and rounds
  // once, so the result is as close as one rounding (and the f32 sums'
  // K·u, 8192 terms: 4.9e-3 in all, where bf16 sums would be off by 1).
  Attrs a = attrs({{"pads", Ints{1, 1, 1, 1}}, {"filter_shape", Ints{16, 16, 3, 3}}});
  TensorType x = f32({2, 16, 64, 64});
  auto node32 = mustMakeNode(Op::ConvGradFilter, {x, x}, a);
  auto node16 = mustMakeNode(
      Op::ConvGradFilter, {TensorType(DType::BF16, x.shape), TensorType(DType::BF16, x.shape)}, a);
  std::mt19937 rng(3);
  Tensor xs = sumbound::convertedTo(randomTensor(x, rng), DType::BF16);
  Tensor dy = sumbound::convertedTo(randomTensor(x, rng), DType::BF16);
  auto want = runOnce(*node32->node, {sumbound::convertedTo(xs, DType::F32),
                                      sumbound::convertedTo(dy, DType::F32)});
  auto got = runOnce(*node16->node, {xs, dy});
  double worst = 0, bound = bf16Bound(*node16->node, got[0].type().dtype);
  EXPECT_TRUE(near(sumbound::convertedTo(got[0], DType::F32), want[0], bound, &worst));
  sumbound::report("bf16 filter gradient of 8192 terms", worst, bound);
}

} // namespace
