//===- GradientCheckTest.cpp - Gradient kernels against finite differences -===//
//
// Each gradient kernel is checked against its own forward kernel: with
// L = sum(r * forward(inputs)) for a random r, the gradient kernel fed dy = r
// must match central differences of L at sampled coordinates (perturb one
// element, run the forward kernel twice, difference in double). Convolution
// and pooling are piecewise linear, so the differences are exact up to float
// rounding; max pooling gets inputs spaced well apart so no perturbation
// changes an argmax. Batch norm is smooth; eps is chosen so truncation and
// rounding both stay far below the tolerance.
//
//===----------------------------------------------------------------------===//

#include "tests/kernels/dnnl/DnnlTestUtil.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace graphc;
using namespace graphc::test;

namespace {

/// Compares d L / d inputs[k] at `samples` random coordinates, and at
/// `extra` ones, with `analytic`.
void checkGradient(KernelHarness &forward, const std::vector<Tensor> &inputs, unsigned k,
                   const Tensor &r, const Tensor &analytic, double eps, double tol,
                   std::mt19937 &rng, int samples = 12, std::vector<int64_t> extra = {}) {
  double sumSq = 0;
  for (int64_t i = 0; i < analytic.numElements(); ++i)
    sumSq += analytic.at(i) * analytic.at(i);
  double rms = std::sqrt(sumSq / analytic.numElements());
  ASSERT_GT(rms, 0) << "a zero gradient checks nothing";
  auto loss = [&](const Tensor &perturbed) {
    std::vector<Tensor> in = inputs;
    in[k] = perturbed;
    auto out = forward.run(in);
    if (!out) {
      ADD_FAILURE() << llvm::toString(out.takeError());
      return 0.0;
    }
    return dot((*out)[0], r);
  };
  std::uniform_int_distribution<int64_t> pick(0, inputs[k].numElements() - 1);
  for (int s = 0; s < samples; ++s)
    extra.push_back(pick(rng));
  for (int64_t i : extra) {
    Tensor plus = inputs[k].clone(), minus = inputs[k].clone();
    plus.set(i, inputs[k].at(i) + eps);
    minus.set(i, inputs[k].at(i) - eps);
    // The step actually taken, after rounding to float.
    double h = plus.at(i) - minus.at(i);
    double fd = (loss(plus) - loss(minus)) / h;
    double g = analytic.at(i);
    EXPECT_LE(std::abs(fd - g), tol * (std::abs(g) + rms))
        << "operand " << k << " element " << i << ": finite difference " << fd << ", kernel " << g;
  }
}

TEST(DnnlGradientCheck, ConvGradDataAndFilter) {
  std::mt19937 rng(1);
  struct Config {
    TensorType x, w;
    Attrs attrs;
  };
  std::vector<Config> configs = {
      {f32({2, 3, 7, 8}), f32({4, 3, 3, 3}), convAttrs({2, 2}, {1, 0, 2, 1}, {1, 1}, 1)},
      {f32({1, 4, 6, 6}), f32({6, 2, 3, 2}), convAttrs({1, 1}, {1, 1, 1, 1}, {2, 1}, 2)},
  };
  for (const Config &c : configs) {
    auto conv = mustMakeNode(Op::Conv, {c.x, c.w}, c.attrs);
    ASSERT_TRUE(conv);
    TensorType y = conv->node->result()->type();
    Attrs dataAttrs = c.attrs, filterAttrs = c.attrs;
    dataAttrs.set("input_shape", Ints(c.x.shape.begin(), c.x.shape.end()));
    filterAttrs.set("filter_shape", Ints(c.w.shape.begin(), c.w.shape.end()));
    auto gradData = mustMakeNode(Op::ConvGradData, {y, c.w}, dataAttrs);
    auto gradFilter = mustMakeNode(Op::ConvGradFilter, {c.x, y}, filterAttrs);
    ASSERT_TRUE(gradData && gradFilter);

    std::vector<Tensor> in = {randomTensor(c.x, rng), randomTensor(c.w, rng)};
    Tensor r = randomTensor(y, rng);
    std::vector<Tensor> dx = runOnce(*gradData->node, {r, in[1]});
    std::vector<Tensor> dw = runOnce(*gradFilter->node, {in[0], r});
    ASSERT_EQ(dx.size(), 1u);
    ASSERT_EQ(dw.size(), 1u);
    auto forward = KernelHarness::create(*conv->node);
    ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
    checkGradient(**forward, in, 0, r, dx[0], 1e-2, 1e-3, rng);
    checkGradient(**forward, in, 1, r, dw[0], 1e-2, 1e-3, rng);
  }
}

Attrs poolAttrs(Ints kernel, Ints strides, Ints pads, int64_t ceil) {
  Attrs a;
  a.set("kernel_shape", kernel);
  a.set("strides", strides);
  a.set("pads", pads);
  a.set("ceil_mode", ceil);
  return a;
}

TEST(DnnlGradientCheck, MaxPoolGrad) {
  std::mt19937 rng(2);
  std::vector<std::pair<TensorType, Attrs>> configs = {
      {f32({2, 3, 9, 10}), poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, 1)},
      {f32({1, 4, 7, 8}), poolAttrs({2, 2}, {2, 2}, {0, 0, 1, 1}, 0)},
  };
  configs.push_back({f32({1, 2, 9, 9}), poolAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, 0)});
  configs.back().second.set("dilations", Ints{2, 2});
  for (auto &[type, attrs] : configs) {
    auto pool = mustMakeNode(Op::MaxPool, {type}, attrs);
    ASSERT_TRUE(pool);
    TensorType y = pool->node->result()->type();
    auto grad = mustMakeNode(Op::MaxPoolGrad, {type, y}, attrs);
    ASSERT_TRUE(grad);
    // Distinct values 0.01 apart: a perturbation of 2e-3 moves no argmax.
    Tensor x(type);
    std::vector<int64_t> order(type.numElements());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i = 0; i < x.numElements(); ++i)
      x.set(i, 0.01 * (double)order[i] - 1.0);
    Tensor r = randomTensor(y, rng);
    std::vector<Tensor> dx = runOnce(*grad->node, {x, r});
    ASSERT_EQ(dx.size(), 1u);
    auto forward = KernelHarness::create(*pool->node);
    ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
    checkGradient(**forward, {x}, 0, r, dx[0], 2e-3, 1e-3, rng, 24);
  }
}

TEST(DnnlGradientCheck, AveragePoolGrad) {
  std::mt19937 rng(3);
  std::vector<std::pair<TensorType, Attrs>> configs = {
      // Windows overhanging the padded input at the end (ceil_mode).
      {f32({1, 2, 10, 10}), poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, 1)},
      {f32({2, 2, 8, 9}), poolAttrs({3, 2}, {2, 2}, {0, 0, 0, 0}, 1)},
      {f32({1, 3, 7, 9}), poolAttrs({3, 3}, {2, 2}, {1, 0, 0, 1}, 0)},
  };
  for (int include : {1, 0})
    for (auto &[type, base] : configs) {
      Attrs attrs = base;
      attrs.set("count_include_pad", (int64_t)include);
      auto pool = mustMakeNode(Op::AveragePool, {type}, attrs);
      ASSERT_TRUE(pool);
      TensorType y = pool->node->result()->type();
      Attrs gradAttrs = attrs;
      gradAttrs.set("input_shape", Ints(type.shape.begin(), type.shape.end()));
      auto grad = mustMakeNode(Op::AveragePoolGrad, {y}, gradAttrs);
      ASSERT_TRUE(grad);
      Tensor x = randomTensor(type, rng), r = randomTensor(y, rng);
      std::vector<Tensor> dx = runOnce(*grad->node, {r});
      ASSERT_EQ(dx.size(), 1u);
      auto forward = KernelHarness::create(*pool->node);
      ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
      // The overhang corrections sit on the last rows and columns: check
      // those of the first channel, and a few elements anywhere.
      std::vector<int64_t> border;
      int64_t H = type.shape[2], W = type.shape[3];
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          if (h >= H - 2 || w >= W - 2)
            border.push_back(h * W + w);
      checkGradient(**forward, {x}, 0, r, dx[0], 1e-2, 1e-3, rng, 8, border);
    }
}

TEST(DnnlGradientCheck, BatchNormTrainGrad) {
  std::mt19937 rng(4);
  for (TensorType type : {f32({3, 4, 3, 3}), f32({6, 5})}) {
    TensorType channels = f32({type.shape[1]});
    Attrs attrs;
    attrs.set("epsilon", 1e-3);
    auto bn = mustMakeNode(Op::BatchNormTrain, {type, channels, channels}, attrs);
    auto grad =
        mustMakeNode(Op::BatchNormTrainGrad, {type, channels, channels, channels, type}, attrs);
    ASSERT_TRUE(bn && grad);
    std::vector<Tensor> in = {randomTensor(type, rng), randomTensor(channels, rng),
                              randomTensor(channels, rng)};
    Tensor r = randomTensor(type, rng);
    std::vector<Tensor> fwd = runOnce(*bn->node, in);
    ASSERT_EQ(fwd.size(), 3u);
    std::vector<Tensor> g = runOnce(*grad->node, {in[0], in[1], fwd[1], fwd[2], r});
    ASSERT_EQ(g.size(), 3u);
    auto forward = KernelHarness::create(*bn->node);
    ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
    checkGradient(**forward, in, 0, r, g[0], 1e-2, 5e-3, rng, 24);
    checkGradient(**forward, in, 1, r, g[1], 1e-2, 1e-3, rng, 4);
    checkGradient(**forward, in, 2, r, g[2], 1e-2, 1e-3, rng, 4);
  }
}

} // namespace
