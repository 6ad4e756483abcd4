//===- Winograd1dTest.cpp - The 1-D Winograd against plain loops -----------===//
//
// kernels/cpu/Winograd1d.h on its own: the F(4, r) tables reproduce the
// correlation exactly (in double), and the three passes on channel-blocked
// tensors agree with direct loops computed in double, for every ISA this CPU
// has (an AVX-512 CPU runs the AVX2 code too, on 8-channel blocks), on 1xK,
// Kx1 and folded KxK' windows with "same", "valid" and uneven padding,
// lengths that leave partial tiles, lines shorter than the window, one
// image, jobs spanning images, more threads than jobs and the wide schedule. Its agreement
// with PyTorch is DnnlReference.Conv's.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Winograd1d.h"
#include "SumBound.h"
#include "tests/kernels/dnnl/DnnlTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

using namespace graphc;
using namespace graphc::wino1d;

namespace {

TEST(Winograd1dTables, ReproduceTheCorrelation) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int r : {3, 5, 7}) {
    const Tables *t = tablesFor(r);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->m, 4);
    EXPECT_EQ(t->alpha, r + 3);
    const int a = t->alpha;
    std::vector<double> d(a), g(r), U(a), V(a);
    for (double &x : d)
      x = u(rng);
    for (double &x : g)
      x = u(rng);
    for (int k = 0; k < a; ++k) {
      U[k] = V[k] = 0;
      for (int j = 0; j < r; ++j)
        U[k] += t->G[k * r + j] * g[j];
      for (int i = 0; i < a; ++i)
        V[k] += t->BT[k * a + i] * d[i];
    }
    for (int i = 0; i < t->m; ++i) {
      double y = 0, want = 0;
      for (int k = 0; k < a; ++k)
        y += t->AT[i * a + k] * U[k] * V[k];
      for (int j = 0; j < r; ++j)
        want += g[j] * d[i + j];
      // The tables are f32: exact up to their rounding.
      EXPECT_NEAR(y, want, 1e-5) << "F(4, " << r << ") output " << i;
    }
  }
  EXPECT_EQ(tablesFor(1), nullptr);
  EXPECT_EQ(tablesFor(9), nullptr);
}

/// A [N, C, H, W] tensor in nChw<B>c, and its element (n, c, h, w).
struct Blocked {
  int64_t N, C, H, W, B;
  std::vector<float> data;
  Blocked(int64_t n, int64_t c, int64_t h, int64_t w, int64_t b)
      : N(n), C(c), H(h), W(w), B(b), data(n * c * h * w) {}
  float &at(int64_t n, int64_t c, int64_t h, int64_t w) {
    return data[(((n * (C / B) + c / B) * H + h) * W + w) * B + c % B];
  }
};

struct Case {
  int64_t n, cin, cout, h, w, kh, kw;
  int64_t pads[4]; ///< begin h, begin w, end h, end w
  int threads;
};

/// Normalized worst difference: max |got - want| over mean |want|.
double normalized(const std::vector<double> &want, const std::vector<float> &got,
                  const std::vector<double> *scale = nullptr) {
  double worst = 0, mean = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    mean += std::fabs(scale ? (*scale)[i] : want[i]);
  }
  return worst / std::max(mean / want.size(), 1e-30);
}

void checkCase(const Case &c, int block) {
  const int64_t oh = c.h + c.pads[0] + c.pads[2] - c.kh + 1,
                ow = c.w + c.pads[1] + c.pads[3] - c.kw + 1;
  SCOPED_TRACE(testing::Message() << "block " << block << ", [" << c.n << "," << c.cin << "," << c.h
                                  << "," << c.w << "] to " << c.cout << ", " << c.kh << "x" << c.kw
                                  << " pads " << c.pads[0] << c.pads[1] << c.pads[2] << c.pads[3]
                                  << ", " << c.threads << " threads");
  int64_t x4[4] = {c.n, c.cin, c.h, c.w}, w4[4] = {c.cout, c.cin, c.kh, c.kw};
  int64_t ones[2] = {1, 1};
  auto shape = shapeOf(x4, w4, ones, ones, c.pads, 1, block);
  ASSERT_TRUE(shape.has_value());
  Plan plan(*shape, c.threads);

  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  Blocked x(c.n, c.cin, c.h, c.w, block), dy(c.n, c.cout, oh, ow, block);
  for (float &v : x.data)
    v = normal(rng);
  for (float &v : dy.data)
    v = normal(rng);
  std::vector<float> w(c.cout * c.cin * c.kh * c.kw), bias(c.cout);
  for (float &v : w)
    v = normal(rng) * 0.1f;
  for (float &v : bias)
    v = normal(rng);

  // Direct loops in double: y, dx, dw.
  Blocked yRef(c.n, c.cout, oh, ow, block), dxRef(c.n, c.cin, c.h, c.w, block);
  std::vector<double> yWant(yRef.data.size()), dxWant(dxRef.data.size()), dwWant(w.size(), 0);
  auto index = [&](Blocked &t, int64_t n, int64_t ch, int64_t h, int64_t ww) {
    return &t.at(n, ch, h, ww) - t.data.data();
  };
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t o = 0; o < c.cout; ++o)
      for (int64_t h = 0; h < oh; ++h)
        for (int64_t ww = 0; ww < ow; ++ww) {
          double y = bias[o];
          for (int64_t ci = 0; ci < c.cin; ++ci)
            for (int64_t a = 0; a < c.kh; ++a)
              for (int64_t b = 0; b < c.kw; ++b) {
                int64_t hi = h - c.pads[0] + a, wi = ww - c.pads[1] + b;
                if (hi < 0 || hi >= c.h || wi < 0 || wi >= c.w)
                  continue;
                int64_t wk = ((o * c.cin + ci) * c.kh + a) * c.kw + b;
                y += (double)w[wk] * x.at(n, ci, hi, wi);
                dxWant[index(dxRef, n, ci, hi, wi)] += (double)w[wk] * dy.at(n, o, h, ww);
                dwWant[wk] += (double)x.at(n, ci, hi, wi) * dy.at(n, o, h, ww);
              }
          yWant[index(yRef, n, o, h, ww)] = y;
        }

  std::vector<float> yGot(yRef.data.size()), dxGot(dxRef.data.size()), dwGot(w.size());
  for (Pass p : {Pass::Forward, Pass::Data, Pass::Filter}) {
    // Scratch full of garbage: nothing may be read before it is written.
    std::vector<float> scratch(plan.scratchBytes(p) / sizeof(float),
                               std::numeric_limits<float>::quiet_NaN());
    if (p == Pass::Forward)
      plan.forward(x.data.data(), w.data(), bias.data(), yGot.data(), scratch.data());
    else if (p == Pass::Data)
      plan.backwardData(dy.data.data(), w.data(), dxGot.data(), scratch.data());
    else
      plan.backwardFilter(x.data.data(), dy.data.data(), dwGot.data(), scratch.data());
  }
  // The inference form: the transformed weights kept (transformWeights, then
  // a forward that never reads w), the output holding an addend it adds to
  // (kAddTo), then clamped at 0 (kRelu).
  // (Errors against the mean magnitude before the ReLU: zeros would halve it.)
  std::vector<double> postWant(yWant.size()), preRelu(yWant.size());
  std::vector<float> postGot(yWant.size());
  for (size_t i = 0; i < yWant.size(); ++i) {
    postGot[i] = normal(rng);
    preRelu[i] = yWant[i] + postGot[i];
    postWant[i] = std::max(0.0, preRelu[i]);
  }
  {
    std::vector<float> scratch(plan.scratchBytes(Pass::Forward) / sizeof(float),
                               std::numeric_limits<float>::quiet_NaN());
    std::vector<float> U(plan.weightFloats(), std::numeric_limits<float>::quiet_NaN());
    plan.transformWeights(w.data(), U.data(), scratch.data());
    plan.forward(x.data.data(), nullptr, bias.data(), postGot.data(), scratch.data(),
                 kAddTo | kRelu, U.data());
  }
  // Each pass against the double loops: the transforms' growth times u, and
  // K·u for its sums (forward: input channels times the window; data
  // gradient: output channels times the window; filter gradient: every
  // output position), of the mean magnitude (tests/common/SumBound.h).
  const int taps = (int)(tablesFor((int)c.kw) ? c.kw : c.kh);
  const double growth = test::winogradGrowth(taps, false);
  const double bounds[3] = {sumbound::bound(c.cin * c.kh * c.kw) + growth * sumbound::kF32,
                            sumbound::bound(c.cout * c.kh * c.kw) + growth * sumbound::kF32,
                            sumbound::bound(c.n * oh * ow) + growth * sumbound::kF32};
  EXPECT_LT(normalized(postWant, postGot, &preRelu), bounds[0])
      << "forward, weights kept, add and ReLU";
  EXPECT_EQ(std::count_if(postGot.begin(), postGot.end(), [](float v) { return !(v >= 0); }), 0);
  double errors[3] = {normalized(yWant, yGot), normalized(dxWant, dxGot),
                      normalized(dwWant, dwGot)};
  EXPECT_LT(errors[0], bounds[0]) << "forward";
  EXPECT_LT(errors[1], bounds[1]) << "data gradient";
  EXPECT_LT(errors[2], bounds[2]) << "filter gradient";
  std::string what = "F(4, " + std::to_string(taps) + ") block " + std::to_string(block) + ", " +
                     std::to_string(c.cin) + " -> " + std::to_string(c.cout) + " channels";
  const char *passes[3] = {"forward", "data", "filter"};
  for (int k = 0; k < 3; ++k)
    sumbound::report(what + ", " + passes[k], errors[k], bounds[k]);
  std::printf("[ wino1d  ] block %2d, %lldx%lld, %2lld -> %2lld channels, %lldx%lld: normalized "
              "error %.1e forward, %.1e data, %.1e filter\n",
              block, (long long)c.kh, (long long)c.kw, (long long)c.cin, (long long)c.cout,
              (long long)c.h, (long long)c.w, errors[0], errors[1], errors[2]);
}

TEST(Winograd1d, ThreePassesAgreeWithDirectLoops) {
  const Case cases[] = {
      {2, 16, 32, 5, 17, 1, 7, {0, 3, 0, 3}, 2}, // inception_v3's 17-long lines: a partial tile
      {2, 32, 16, 17, 3, 7, 1, {3, 0, 3, 0}, 2}, // 7x1 along the height
      {1, 16, 16, 3, 2, 1, 7, {0, 3, 0, 3}, 1},  // a line shorter than the window
      {3, 48, 16, 1, 1, 7, 1, {3, 0, 3, 0}, 3},  // one position per line, more threads than work
      {2, 16, 48, 8, 8, 1, 3, {0, 1, 0, 1}, 2},  // 1x3 on whole tiles
      {1, 32, 32, 9, 6, 3, 1, {1, 0, 1, 0}, 2},  // 3x1
      {2, 16, 16, 4, 11, 1, 5, {0, 2, 0, 2}, 2}, // 1x5
      {1, 16, 16, 60, 9, 1, 7, {0, 3, 0, 3}, 2}, // many lines: several jobs per image
      {2, 16, 32, 9, 11, 3, 3, {1, 1, 1, 1}, 2}, // 3x3, "same": three lines folded
      {2, 32, 16, 10, 9, 3, 3, {0, 0, 0, 0}, 2}, // 3x3, "valid" (inception_v3's stem)
      {1, 16, 16, 7, 13, 5, 5, {2, 2, 2, 2}, 2}, // 5x5
      {2, 16, 16, 6, 7, 3, 5, {0, 1, 2, 3}, 2},  // 3x5, uneven padding
      {3, 16, 16, 2, 3, 3, 3, {1, 1, 1, 1}, 2},  // jobs spanning images
      // Over 1 MB of transformed weights and few tiles: the wide schedule (one
      // job of every tile, the weights in panels of columns, products split
      // by panels, one filter accumulator).
      {2, 512, 512, 3, 3, 3, 3, {1, 1, 1, 1}, 2},
      {2, 448, 448, 2, 9, 1, 7, {0, 3, 0, 3}, 3},
      {1, 160, 96, 3, 5, 3, 3, {1, 1, 1, 1}, 2}, // panels of 32 on AVX-512 (not 64)
      {1, 208, 80, 3, 4, 3, 3, {1, 1, 1, 1}, 3}, // panels of one vector on AVX-512
  };
  int ran = 0;
  for (int block : {8, 16}) {
    if (!kernelsFor(block))
      continue;
    ++ran;
    for (const Case &c : cases)
      checkCase(c, block);
  }
  if (!ran)
    GTEST_SKIP() << "this CPU has neither AVX2 with FMA nor AVX-512";
}

TEST(Winograd1d, ShapesItDoesNotTake) {
  int block = kernelsFor(16) ? 16 : kernelsFor(8) ? 8 : 0;
  if (!block)
    GTEST_SKIP() << "no vector code for this CPU";
  int64_t x[4] = {2, 32, 17, 17}, ones[2] = {1, 1}, twos[2] = {2, 2};
  int64_t w17[4] = {32, 32, 1, 7}, w33[4] = {32, 32, 3, 3}, w19[4] = {32, 32, 1, 9},
          w11[4] = {32, 32, 1, 1}, w91[4] = {32, 32, 9, 1}, w37[4] = {32, 32, 3, 7};
  int64_t same[4] = {0, 3, 0, 3}, valid[4] = {0, 0, 0, 0}, lopsided[4] = {0, 3, 0, 2},
          wide[4] = {0, 7, 0, 7}, tall[4] = {3, 3, 0, 3};
  EXPECT_TRUE(shapeOf(x, w17, ones, ones, same, 1, block).has_value());
  EXPECT_TRUE(shapeOf(x, w17, ones, ones, valid, 1, block).has_value()) << "no padding";
  EXPECT_TRUE(shapeOf(x, w17, ones, ones, lopsided, 1, block).has_value()) << "uneven padding";
  EXPECT_TRUE(shapeOf(x, w33, ones, ones, valid, 1, block).has_value()) << "a 3x3 window";
  EXPECT_TRUE(shapeOf(x, w37, ones, ones, valid, 1, block).has_value()) << "3x7";
  EXPECT_FALSE(shapeOf(x, w17, twos, ones, same, 1, block)) << "stride 2";
  EXPECT_FALSE(shapeOf(x, w17, ones, twos, same, 1, block)) << "dilation 2";
  EXPECT_FALSE(shapeOf(x, w17, ones, ones, wide, 1, block)) << "padding as wide as the window";
  EXPECT_FALSE(shapeOf(x, w17, ones, ones, tall, 1, block)) << "padding across a 1-line window";
  EXPECT_FALSE(shapeOf(x, w17, ones, ones, same, 2, block)) << "groups";
  EXPECT_FALSE(shapeOf(x, w19, ones, ones, valid, 1, block)) << "9 taps";
  EXPECT_FALSE(shapeOf(x, w91, ones, ones, valid, 1, block)) << "9x1";
  EXPECT_FALSE(shapeOf(x, w11, ones, ones, valid, 1, block)) << "1x1";
  int64_t x12[4] = {2, 12, 17, 17}, w12[4] = {32, 12, 1, 7};
  EXPECT_FALSE(shapeOf(x12, w12, ones, ones, same, 1, block)) << "a partial channel block";
  EXPECT_FALSE(shapeOf(x, w17, ones, ones, same, 1, 4)) << "no vector code for 4-float blocks";
  int64_t x3[4] = {2, 32, 17, 3};
  EXPECT_FALSE(shapeOf(x3, w17, ones, ones, valid, 1, block)) << "no output";
}

} // namespace
