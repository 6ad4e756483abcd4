//===- LayerNormHostTest.cpp - Layer norm's device bodies, on the host ----===//
//
// No GPU needed: the LayerNorm kernels' sums are run here in the order the
// blocks take them (LayerNormDevice.h: lane sums and the tree for rows, the
// rows in order for columns) with the per-element bodies, and compared with
// the CPU kernel. Column sums and every elementwise step are the CPU's in
// the same order (bit for bit); row sums differ only in the order of double
// additions (1e-6 relative, normwise). The emulation is shown to fail when a
// body is wrong (a shifted mean).
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "kernels/cuda/LayerNormDevice.h"

#include <gtest/gtest-spi.h>

namespace graphc {
namespace {

using namespace cuda;

const LayerNormCase kCases[] = {{{6, 16}, 1, true},   {{3, 4, 300}, 2, true}, {{2, 3, 5, 7}, 2, false},
                         {{2, 257}, -1, true}, {{700, 8}, 1, true},    {{5, 1}, 1, true},
                         {{3, 2048}, 1, false}};

/// Normwise: every element within tol of the largest |want|.
void expectClose(const Tensor &got, const Tensor &want, double tol, const std::string &what) {
  ASSERT_EQ(got.numElements(), want.numElements()) << what;
  double top = 0, worst = 0;
  for (int64_t i = 0; i < want.numElements(); ++i)
    top = std::max(top, std::abs(want.at(i)));
  for (int64_t i = 0; i < want.numElements(); ++i)
    worst = std::max(worst, std::abs(got.at(i) - want.at(i)));
  EXPECT_LE(worst, tol * std::max(top, 1e-30)) << what;
}

struct Emulated {
  std::vector<LnStats> stats;
  Tensor y, dx, dscale, dbias;
};

/// The device's LayerNorm and LayerNormGrad on [rows, d]; `meanShift` breaks
/// the statistics on purpose.
Emulated emulate(int64_t rows, int64_t d, float eps, const Tensor &x, const Tensor &scale,
                 const Tensor *bias, const Tensor &dy, float meanShift = 0) {
  Emulated e{{}, Tensor(x.type()), Tensor(x.type()), Tensor(scale.type()), Tensor(scale.type())};
  const float *xp = x.data<float>(), *sp = scale.data<float>(), *dyp = dy.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = xp + r * d;
    double mean = lnMean(lnRowSumsAsBlock(LnValueTerm{xr}, d).a, d) + meanShift;
    LnStats s{mean, lnRstd(lnRowSumsAsBlock(LnSquareTerm{xr, mean}, d).a, d, eps)};
    e.stats.push_back(s);
    for (int64_t j = 0; j < d; ++j)
      e.y.data<float>()[r * d + j] = lnForward(xr[j], s, sp[j], bias ? bias->data<float>()[j] : 0);
  }
  for (int64_t j = 0; j < d; ++j) {
    LnSums c = lnColumnSums(xp, dyp, e.stats.data(), rows, d, j);
    e.dscale.data<float>()[j] = (float)c.a;
    e.dbias.data<float>()[j] = (float)c.b;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const LnStats s = e.stats[r];
    LnSums g = lnRowSumsAsBlock(LnGradTerm{xp + r * d, dyp + r * d, sp, s}, d);
    float meanG = (float)(g.a / (double)d), meanGXhat = (float)(g.b / (double)d);
    for (int64_t j = 0; j < d; ++j)
      e.dx.data<float>()[r * d + j] =
          lnBackward(xp[r * d + j], dyp[r * d + j], sp[j], s, meanG, meanGXhat);
  }
  return e;
}

void checkCase(const LayerNormCase &lc, float meanShift, bool forwardOnly = false) {
  std::mt19937 rng(7);
  OneNode c;
  LayerNormNodes n = layerNormNodes(c, lc, 1e-4);
  Node *fwd = n.forward, *grad = n.grad;
  ASSERT_TRUE(fwd && grad);
  const TensorType &xt = n.x, &st = n.scale;
  Tensor x = randomTensor(xt, rng, -2, 4), scale = randomTensor(st, rng, 0.5, 1.5),
         bias = randomTensor(st, rng, -1, 1), dy = randomTensor(xt, rng, -1, 1);
  std::vector<Tensor> fin{x, scale};
  if (lc.bias)
    fin.push_back(bias);
  auto wantY = runNode(*fwd, fin);
  auto wantG = runNode(*grad, {x, scale, dy});
  ASSERT_TRUE(wantY && wantG);
  int64_t d = st.numElements(), rows = xt.numElements() / d;
  Emulated e = emulate(rows, d, 1e-4f, x, scale, lc.bias ? &bias : nullptr, dy, meanShift);
  std::string what = shapeToString(lc.shape) + " axis " + std::to_string(lc.axis);
  expectClose(e.y, (*wantY)[0], 1e-6, "y " + what);
  if (forwardOnly)
    return;
  expectClose(e.dx, (*wantG)[0], 1e-6, "dx " + what);
  expectClose(e.dscale, (*wantG)[1], 1e-6, "dscale " + what);
  expectClose(e.dbias, (*wantG)[2], 0, "dbias " + what);
}

TEST(LayerNormEmulation, BlockSumsAndBodiesMatchTheCpuKernel) {
  for (const LayerNormCase &lc : kCases)
    checkCase(lc, 0);
}

TEST(LayerNormEmulation, TheComparisonCanFail) {
  EXPECT_NONFATAL_FAILURE(checkCase(kCases[0], 1e-3f, /*forwardOnly=*/true), "y ");
}

TEST(LayerNormEmulation, TheTreeAddsLanesInItsFixedOrder) {
  // Lane t holds elements t, t + T, ...: a row of 2T + 1 ones gives lane 0
  // three terms and every other lane two.
  std::vector<float> ones(2 * kLnThreads + 1, 1.0f);
  EXPECT_EQ(lnLaneSums(LnValueTerm{ones.data()}, (int64_t)ones.size(), 0).a, 3.0);
  EXPECT_EQ(lnLaneSums(LnValueTerm{ones.data()}, (int64_t)ones.size(), 1).a, 2.0);
  EXPECT_EQ(lnRowSumsAsBlock(LnValueTerm{ones.data()}, (int64_t)ones.size()).a,
            (double)ones.size());
}

} // namespace
} // namespace graphc
