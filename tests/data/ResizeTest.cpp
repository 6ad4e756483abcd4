//===- ResizeTest.cpp - Resize policy against torch, channel conversion ---===//
#include "TestSupport.h"

#include "executor/data/Resize.h"
#include "executor/data/ShapeConversion.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace graphc;
using namespace graphc::testing;

TEST(Resize, MatchesTorchAntialiasedBilinearWithCentreCrop) {
  std::string ref = referenceDir();
  ASSERT_FALSE(ref.empty());
  // The cases of make_reference.py: in_h, in_w, out_h, out_w.
  const int64_t cases[][4] = {{28, 28, 299, 299}, {375, 500, 224, 224}, {300, 200, 32, 32},
                              {17, 23, 32, 32},   {50, 40, 20, 28},     {32, 32, 32, 32}};
  std::vector<float> scratch;
  for (int n = 0; n < 6; ++n) {
    Tensor in = loadNpy(ref + "/resize/in" + std::to_string(n) + ".npy");
    Tensor expected = loadNpy(ref + "/resize/out" + std::to_string(n) + ".npy");
    const int64_t *c = cases[n];
    ASSERT_EQ(in.shape(), llvm::ArrayRef<int64_t>({c[0], c[1]}));
    ASSERT_EQ(expected.shape(), llvm::ArrayRef<int64_t>({c[2], c[3]}));
    ResizePlan plan = planResize(c[0], c[1], c[2], c[3]);
    std::vector<float> out(c[2] * c[3], -100.0f);
    resizePlane(plan, in.data<float>(), out.data(), scratch);
    double worst = 0;
    for (int64_t k = 0; k < expected.numElements(); ++k)
      worst = std::max(worst, std::abs((double)out[k] - expected.data<float>()[k]));
    EXPECT_LT(worst, 2e-6) << c[0] << "x" << c[1] << " -> " << c[2] << "x" << c[3];
  }
}

TEST(Resize, CoverThenCentreCropGeometry) {
  // A 375×500 photo to 224×224: shorter side 224, longer floor(224·500/375).
  ResizePlan p = planResize(375, 500, 224, 224);
  EXPECT_EQ(p.scaledHeight, 224);
  EXPECT_EQ(p.scaledWidth, 298);
  EXPECT_EQ(p.cropTop, 0);
  EXPECT_EQ(p.cropLeft, 37);
  // Portrait.
  p = planResize(500, 375, 224, 224);
  EXPECT_EQ(p.scaledHeight, 298);
  EXPECT_EQ(p.scaledWidth, 224);
  EXPECT_EQ(p.cropTop, 37);
  // Odd margins round as Python's round(): 1.5 → 2, 2.5 → 2.
  EXPECT_EQ(planResize(10, 13, 10, 10).cropLeft, 2);
  EXPECT_EQ(planResize(10, 15, 10, 10).cropLeft, 2);
  EXPECT_EQ(planResize(10, 11, 10, 10).cropLeft, 0);
  // A non-square target covered by width.
  p = planResize(100, 100, 20, 40);
  EXPECT_EQ(p.scaledHeight, 40);
  EXPECT_EQ(p.scaledWidth, 40);
  EXPECT_EQ(p.cropTop, 10);
  // Weights of every output sum to one, so a constant plane stays constant.
  std::vector<float> in(37 * 53, 0.75f), out(29 * 31), scratch;
  resizePlane(planResize(37, 53, 29, 31), in.data(), out.data(), scratch);
  for (float v : out)
    EXPECT_NEAR(v, 0.75f, 1e-6);
}

TEST(ShapeConversion, GreyToRgbReplicates) {
  Normalization norm{{0.5f}, {0.25f}};
  auto conv = ShapeConversion::create({1, 2, 2}, norm, {3, 4, 4});
  ASSERT_TRUE(bool(conv)) << llvm::toString(conv.takeError());
  float in[4] = {1, -1, 0.5f, 2};
  std::vector<float> out(48), plane, scratch;
  conv->convert(in, out.data(), plane, scratch);
  std::vector<float> resized(16);
  resizePlane(planResize(2, 2, 4, 4), in, resized.data(), scratch);
  for (int c = 0; c < 3; ++c)
    for (int k = 0; k < 16; ++k)
      EXPECT_EQ(out[c * 16 + k], resized[k]);
}

TEST(ShapeConversion, RgbToGreyIsNormalisedLuminance) {
  Normalization norm{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  auto conv = ShapeConversion::create({3, 1, 2}, norm, {1, 1, 2});
  ASSERT_TRUE(bool(conv));
  // Raw intensities → normalised input; expected: the luminance of the raw
  // values, normalised with the luminance of the means and of the stds.
  float raw[3][2] = {{0.9f, 0.1f}, {0.2f, 0.3f}, {0.6f, 1.0f}};
  const float w[3] = {0.299f, 0.587f, 0.114f};
  float in[6];
  for (int c = 0; c < 3; ++c)
    for (int k = 0; k < 2; ++k)
      in[c * 2 + k] = (raw[c][k] - norm.mean[c]) / norm.std[c];
  float out[2];
  std::vector<float> plane, scratch;
  conv->convert(in, out, plane, scratch);
  double meanL = 0, stdL = 0;
  for (int c = 0; c < 3; ++c) {
    meanL += w[c] * norm.mean[c];
    stdL += w[c] * norm.std[c];
  }
  for (int k = 0; k < 2; ++k) {
    double lum = w[0] * raw[0][k] + w[1] * raw[1][k] + w[2] * raw[2][k];
    EXPECT_NEAR(out[k], (lum - meanL) / stdL, 1e-5);
  }
}

TEST(ShapeConversion, UnsupportedChannelCountsAreErrors) {
  Normalization two{{0, 0}, {1, 1}};
  auto conv = ShapeConversion::create({2, 4, 4}, two, {3, 4, 4});
  ASSERT_FALSE(bool(conv));
  std::string msg = llvm::toString(conv.takeError());
  EXPECT_NE(msg.find("cannot convert 2-channel samples (2x4x4) to 3 channels"), std::string::npos)
      << msg;
  auto zero = ShapeConversion::create({1, 4, 4}, Normalization{{0}, {1}}, {1, 0, 4});
  ASSERT_FALSE(bool(zero));
  llvm::consumeError(zero.takeError());
  auto same = ShapeConversion::create({3, 8, 8}, Normalization(), {3, 8, 8});
  ASSERT_TRUE(bool(same));
  EXPECT_TRUE(same->isIdentity());
}
