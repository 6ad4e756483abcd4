//===- ChannelsLastHostTest.cpp - NHWC on GPUs: the host's half -----------===//
//
// No GPU needed: the policy (--gpu-layout), the layout answers of the CUDA
// kernels (GpuLayoutRules.h) and the copies they predict, the layout copy's
// tiles walked on the host as the kernel walks them (every element lands
// where NHWC puts it, once), and the pooling bodies reading and writing
// channels-last tensors against the plain ones, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "kernels/ChannelsLast.h"
#include "kernels/cuda/GpuLayoutRules.h"
#include "kernels/cuda/KernelPlans.h"
#include "kernels/cuda/LayoutDevice.h"

#include <vector>

namespace graphc {
namespace {

using namespace cuda;

constexpr Layout kPlain = Layout::Plain, kCL = Layout::ChannelsLast;

TEST(GpuLayout, ParsedOnceWithOneClearError) {
  for (GpuLayout l : {GpuLayout::Nchw, GpuLayout::Nhwc, GpuLayout::Auto})
    EXPECT_EQ(cantFail(parseGpuLayout(gpuLayoutName(l))), l);
  auto bad = parseGpuLayout("NHWC");
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "unknown GPU activation layout 'NHWC'; known: nchw, nhwc, auto");
}

TEST(GpuLayout, AutoIsChannelsLastForSixteenBitFloatsOnly) {
  for (DType t : {DType::F16, DType::BF16}) {
    EXPECT_TRUE(channelsLastFor(GpuLayout::Auto, t));
    EXPECT_TRUE(channelsLastFor(GpuLayout::Nhwc, t));
    EXPECT_FALSE(channelsLastFor(GpuLayout::Nchw, t));
  }
  EXPECT_FALSE(channelsLastFor(GpuLayout::Auto, DType::F32));
  EXPECT_TRUE(channelsLastFor(GpuLayout::Nhwc, DType::F32));
  for (DType t : {DType::I64, DType::I32, DType::Bool})
    EXPECT_FALSE(channelsLastFor(GpuLayout::Nhwc, t));
  EXPECT_EQ(channelsLastDims({2, 3, 5, 7}), (Dims{2, 5, 7, 3}));
  EXPECT_EQ(channelsLastAxis(1), 3);
  EXPECT_EQ(channelsLastAxis(0), 0);
  EXPECT_EQ(channelsLastAxis(3), 2);
}

Attrs convAttrs() {
  Attrs a;
  a.set("pads", Ints{1, 1, 1, 1});
  return a;
}

TEST(GpuLayoutRules, ConvolutionsComputeInNhwcWhereThePolicyAllowsTheirType) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    OneNode c;
    // bf16 plans keep f32 weights (passes/MixedPrecision.h).
    DType wt = t == DType::BF16 ? DType::F32 : t;
    Value *x = c.input("x", TensorType(t, {2, 8, 6, 6}));
    Value *w = c.input("w", TensorType(wt, {16, 8, 3, 3}));
    Value *b = c.input("b", TensorType(wt, {16}));
    Node *conv = c.node(Op::Conv, {x, w, b}, convAttrs());
    ASSERT_TRUE(conv);
    for (GpuLayout policy : {GpuLayout::Nchw, GpuLayout::Nhwc, GpuLayout::Auto}) {
      const bool nhwc = channelsLastFor(policy, t);
      EXPECT_EQ(convComputesChannelsLast(*conv, policy), nhwc);
      LayoutAnswers a = gpuLayoutAnswers(*conv, policy);
      EXPECT_EQ(a.accepts(0, kCL), nhwc) << dtypeName(t).str() << " x";
      EXPECT_EQ(a.accepts(1, kCL), nhwc) << "the weights: a KRSC filter";
      EXPECT_FALSE(a.accepts(2, kCL)) << "the bias is 1-D";
      EXPECT_EQ(a.produces(0, kCL), nhwc);
      EXPECT_EQ(a.preferOperands[0], nhwc ? std::optional<Layout>(kCL) : std::nullopt);
      EXPECT_EQ(a.preferResults[0], nhwc ? std::optional<Layout>(kCL) : std::nullopt);
      EXPECT_FALSE(a.follows);
      EXPECT_TRUE(a.accepts(0, kPlain) && a.produces(0, kPlain));
      EXPECT_FALSE(a.accepts(0, Layout::Blocked)) << "a CPU layout";
    }
  }
}

TEST(GpuLayoutRules, PoolsTakeEachTensorInItsOwnLayout) {
  OneNode c;
  Value *x = c.input("x", TensorType(DType::F32, {2, 4, 9, 9}));
  Attrs a;
  a.set("kernel_shape", Ints{3, 3});
  a.set("strides", Ints{2, 2});
  Node *pool = c.node(Op::MaxPool, {x}, a);
  ASSERT_TRUE(pool);
  Node *grad = c.node(Op::MaxPoolGrad, {x, c.input("dy", pool->result()->type())}, a);
  ASSERT_TRUE(grad);
  Node *gap = c.node(Op::GlobalAveragePool, {x});
  ASSERT_TRUE(gap);
  for (Node *n : {pool, grad}) {
    LayoutAnswers l = gpuLayoutAnswers(*n, GpuLayout::Auto);
    for (unsigned i = 0; i < n->numOperands(); ++i)
      EXPECT_TRUE(l.accepts(i, kCL)) << opName(n->op()).str() << " operand " << i;
    EXPECT_TRUE(l.produces(0, kCL));
    EXPECT_FALSE(l.follows) << "each on its own";
    EXPECT_FALSE(l.preferOperands[0]) << "memory-bound either way";
  }
  LayoutAnswers g = gpuLayoutAnswers(*gap, GpuLayout::Auto);
  EXPECT_TRUE(g.accepts(0, kCL));
  EXPECT_FALSE(g.produces(0, kCL)) << "[n, c, 1, 1]: plain";
}

TEST(GpuLayoutRules, ElementwiseOpsConcatAndSplitFollowTheirOperands) {
  OneNode c;
  TensorType t(DType::F16, {2, 4, 5, 5});
  Value *a = c.input("a", t), *b = c.input("b", t);
  Node *add = c.node(Op::Add, {a, b}, {}, "add");
  Node *relu = c.node(Op::Relu, {a}, {}, "relu");
  Node *grad = c.node(Op::ReluGrad, {a, b}, {}, "relu_grad");
  Node *sum = c.node(Op::AddN, {a, b, a}, {}, "addn");
  Attrs axis;
  axis.set("axis", (int64_t)1);
  Node *concat = c.node(Op::Concat, {a, b}, axis, "concat");
  Attrs split = axis;
  split.set("split", Ints{1, 3});
  Node *parts = c.node(Op::Split, {a}, split, "split");
  Node *bias = c.node(Op::Add, {a, c.input("bias", TensorType(DType::F16, {4, 1, 1}))}, {}, "bias");
  Node *flat = c.node(Op::Flatten, {a}, {}, "flatten");
  ASSERT_TRUE(add && relu && grad && sum && concat && parts && bias && flat);
  for (Node *n : {add, relu, grad, sum, concat, parts}) {
    LayoutAnswers l = gpuLayoutAnswers(*n, GpuLayout::Auto);
    EXPECT_TRUE(l.follows) << n->name();
    for (unsigned i = 0; i < n->numOperands(); ++i)
      EXPECT_TRUE(l.accepts(i, kCL)) << n->name();
    for (unsigned i = 0; i < n->numResults(); ++i)
      EXPECT_TRUE(l.produces(i, kCL)) << n->name();
  }
  for (Node *n : {bias, flat}) {
    LayoutAnswers l = gpuLayoutAnswers(*n, GpuLayout::Auto);
    EXPECT_FALSE(l.accepts(0, kCL)) << n->name() << ": broadcasting and reshapes are plain";
    EXPECT_FALSE(l.produces(0, kCL)) << n->name();
  }
}

TEST(GpuLayoutRules, CastsBetweenFloatsTransposeOnTheWay) {
  OneNode c;
  Value *x = c.input("x", TensorType(DType::F32, {4, 3, 3, 3}));
  Attrs to16;
  to16.set("to", DType::F16);
  Node *narrow = c.node(Op::Cast, {x}, to16, "to_f16");
  Attrs to32;
  to32.set("to", DType::F32);
  Node *same = c.node(Op::Cast, {x}, to32, "same");
  ASSERT_TRUE(narrow && same);
  LayoutAnswers n = gpuLayoutAnswers(*narrow, GpuLayout::Auto);
  EXPECT_TRUE(n.accepts(0, kCL) && n.produces(0, kCL));
  EXPECT_FALSE(n.follows) << "each side its own layout";
  LayoutCopies moved = gpuLayoutCopies(*narrow, GpuLayout::Auto, {kPlain}, {kCL});
  EXPECT_EQ(moved.fused, 1);
  EXPECT_EQ(moved.separate, 0);
  EXPECT_EQ(gpuLayoutCopies(*narrow, GpuLayout::Auto, {kCL}, {kCL}).fused, 0);
  LayoutAnswers s = gpuLayoutAnswers(*same, GpuLayout::Auto);
  EXPECT_TRUE(s.follows) << "a copy";
}

TEST(GpuLayoutRules, BatchNormsTakeChannelsLastAndTransposeWhatDiffersFromX) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    OneNode c;
    std::mt19937 rng(1);
    BatchNormCase bn = batchNormCase(c, {2, 8, 5, 5}, t, rng);
    ASSERT_TRUE(bn.train && bn.grad && bn.infer);
    for (Node *n : {bn.train, bn.grad, bn.infer}) {
      const std::string what = opName(n->op()).str() + " " + dtypeName(t).str();
      LayoutAnswers l = gpuLayoutAnswers(*n, GpuLayout::Auto);
      EXPECT_TRUE(l.accepts(0, kCL)) << what;
      EXPECT_TRUE(l.produces(0, kCL)) << what;
      EXPECT_FALSE(l.follows) << what << ": the channel vectors stay plain";
      EXPECT_FALSE(l.preferOperands[0]) << what << ": memory-bound either way";
      EXPECT_FALSE(l.accepts(1, kCL)) << "the scale is 1-D";
      if (n->op() == Op::BatchNormTrainGrad) {
        EXPECT_TRUE(l.accepts(4, kCL)) << "dy";
        EXPECT_FALSE(l.accepts(3, kCL)) << "var";
      }
      if (n->numResults() > 1) {
        EXPECT_FALSE(l.produces(1, kCL)) << "statistics or dscale";
      }
      // All of x's shape in one layout: no copy; each that differs from x's
      // is transposed through scratch, a separate pass.
      std::vector<Layout> in(n->numOperands(), kPlain), out(n->numResults(), kPlain);
      for (unsigned i = 0; i < in.size(); ++i)
        if (n->operand(i)->type().rank() == 4)
          in[i] = kCL;
      out[0] = kCL;
      LayoutCopies same = gpuLayoutCopies(*n, GpuLayout::Auto, in, out);
      EXPECT_EQ(same.separate + same.fused, 0) << what;
      out[0] = kPlain;
      LayoutCopies one = gpuLayoutCopies(*n, GpuLayout::Auto, in, out);
      EXPECT_EQ(one.separate, 1) << what << ": the result";
      EXPECT_EQ(one.fused, 0) << what;
      in[0] = kPlain;
      LayoutCopies rest = gpuLayoutCopies(*n, GpuLayout::Auto, in, out);
      EXPECT_EQ(rest.separate, n->op() == Op::BatchNormTrainGrad ? 1 : 0) << what << ": dy";
    }
  }
}

TEST(GpuLayoutRules, ConvolutionCopiesAreSeparateForDataAndFusedForWideWeights) {
  OneNode c;
  Value *x = c.input("x", TensorType(DType::BF16, {2, 8, 6, 6}));
  Value *w = c.input("w", TensorType(DType::F32, {16, 8, 3, 3}));
  Node *conv = c.node(Op::Conv, {x, w}, convAttrs());
  ASSERT_TRUE(conv);
  // x plain, the f32 weights plain, y channels-last.
  LayoutCopies k = gpuLayoutCopies(*conv, GpuLayout::Auto, {kPlain, kPlain}, {kCL});
  EXPECT_EQ(k.separate, 1) << "x";
  EXPECT_EQ(k.fused, 1) << "the weights, narrowed anyway";
  LayoutCopies none = gpuLayoutCopies(*conv, GpuLayout::Nchw, {kPlain, kPlain}, {kPlain});
  EXPECT_EQ(none.separate + none.fused, 0) << "NCHW computes plain";
}

//===-- The layout copy's tiles -------------------------------------------===//

/// Runs the kernel's loops on the host: every tile, every thread of it, the
/// stage into the tile and the write out of it.
std::vector<int64_t> walkTiles(const TransposeShape &s) {
  const int64_t total = s.batch * s.rows * s.cols;
  std::vector<int64_t> written(total, -1);
  for (int64_t t = 0; t < transposeTiles(s); ++t) {
    TransposeTile at = transposeTileAt(s, t);
    int64_t tile[kTransposeTile][kTransposeTile];
    for (int ty = 0; ty < kTransposeRows; ++ty)
      for (int tx = 0; tx < kTransposeTile; ++tx)
        for (int i = ty; i < kTransposeTile; i += kTransposeRows) {
          int64_t row = at.row + i, col = at.col + tx;
          if (row < s.rows && col < s.cols)
            tile[i][tx] = transposeSource(s, at.matrix, row, col);
        }
    for (int ty = 0; ty < kTransposeRows; ++ty)
      for (int tx = 0; tx < kTransposeTile; ++tx)
        for (int i = ty; i < kTransposeTile; i += kTransposeRows) {
          int64_t row = at.row + tx, col = at.col + i;
          if (row < s.rows && col < s.cols) {
            int64_t to = transposeTarget(s, at.matrix, row, col);
            EXPECT_EQ(written[to], -1) << "written twice";
            written[to] = tile[tx][i];
          }
        }
  }
  return written;
}

TEST(LayoutCopy, EveryElementLandsWhereItsLayoutPutsItOnce) {
  const Dims shapes[] = {{2, 3, 5, 7}, {1, 64, 35, 35}, {3, 33, 1, 1}, {2, 1, 40, 3}, {1, 2, 1, 1}};
  for (const Dims &d : shapes) {
    const int64_t n = d[0], c = d[1], h = d[2], w = d[3];
    // Plain -> channels-last: the element read for NHWC position p is the
    // NCHW element that belongs there.
    std::vector<int64_t> toLast = walkTiles(layoutCopyShape(n, c, h, w, true));
    std::vector<int64_t> toPlain = walkTiles(layoutCopyShape(n, c, h, w, false));
    int64_t plain = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < c; ++j)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t x = 0; x < w; ++x, ++plain) {
            int64_t last = channelsLastOffset(c, h, w, i, j, y, x);
            ASSERT_EQ(toLast[last], plain) << shapeToString(d);
            ASSERT_EQ(toPlain[plain], last) << shapeToString(d);
          }
  }
}

TEST(LayoutCopy, TheHostReferenceRoundTrips) {
  std::mt19937 rng(3);
  for (DType t : {DType::F32, DType::F16, DType::I64}) {
    Tensor x = randomTensor(TensorType(t, {2, 3, 4, 5}), rng);
    Tensor last = toChannelsLast(x);
    EXPECT_EQ(last.at(1), x.at(20)) << "(0, 0, 0, 1) follows (0, 0, 0, 0) in NHWC: channel 1";
    EXPECT_TRUE(sameBits(fromChannelsLast(last), x));
  }
}

//===-- Pooling over channels-last tensors --------------------------------===//

/// The pooling bodies over x in `xl`, the output side in `yl`, dx in `dxl`,
/// brought back to plain: the same arithmetic in the same order as plain.
struct PoolRun {
  Tensor y, dx;
};
PoolRun runPool(PoolParams p, const Tensor &x, const Tensor &dy, const TensorType &yt, bool xl,
                bool yl, bool dxl) {
  p.xLast = xl;
  p.yLast = yl;
  p.dxLast = dxl;
  Tensor xs = xl ? toChannelsLast(x) : x, dys = yl ? toChannelsLast(dy) : dy;
  Tensor y(yt), dx(x.type());
  for (int64_t e = 0; e < y.numElements(); ++e)
    y.data<float>()[e] = poolForwardAt(p, xs.data<float>(), e);
  std::vector<int> argmax;
  if (p.max)
    for (int64_t e = 0; e < y.numElements(); ++e)
      argmax.push_back(poolArgMaxAt(p, xs.data<float>(), e));
  for (int64_t e = 0; e < dx.numElements(); ++e)
    dx.data<float>()[e] = poolBackwardAt(p, p.max ? argmax.data() : nullptr, dys.data<float>(), e);
  return {yl ? fromChannelsLast(y) : y, dxl ? fromChannelsLast(dx) : dx};
}

TEST(Emulation, PoolingInEveryMixOfLayoutsIsThePlainPoolingBitForBit) {
  std::mt19937 rng(11);
  for (const PoolCase &pc : poolCases()) {
    OneNode c;
    TensorType xt(DType::F32, {2, 3, 9, 8});
    Node *n = c.node(pc.op, {c.input("x", xt)}, pc.attrs, "pool");
    ASSERT_TRUE(n);
    auto p = poolParams(*n);
    ASSERT_TRUE((bool)p) << llvm::toString(p.takeError());
    Tensor x = randomTensor(xt, rng), dy = randomTensor(n->result()->type(), rng);
    // Ties: the first maximum in window order must win in every layout.
    for (int64_t i = 0; i < x.numElements(); i += 3)
      x.set(i, std::round(x.at(i) * 2) / 2);
    PoolRun plain = runPool(*p, x, dy, n->result()->type(), false, false, false);
    for (int mix = 1; mix < 8; ++mix) {
      PoolRun got = runPool(*p, x, dy, n->result()->type(), mix & 1, mix & 2, mix & 4);
      EXPECT_TRUE(sameBits(got.y, plain.y)) << pc.what << " layouts " << mix;
      EXPECT_TRUE(sameBits(got.dx, plain.dx)) << pc.what << " gradient, layouts " << mix;
    }
  }
}

} // namespace
} // namespace graphc
