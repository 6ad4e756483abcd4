#include "ir/Initializers.h"
#include "ir/Tensor.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace graphc;

TEST(Tensor, HalfAndBFloatConversionsRoundToNearestEven) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(halfBitsToFloat(floatToHalfBits(f)), f) << f;
  EXPECT_EQ(floatToHalfBits(1e6f), 0x7c00) << "overflow goes to infinity";
  EXPECT_EQ(halfBitsToFloat(floatToHalfBits(1.0f + 1.0f / 4096)), 1.0f) << "ties to even";
  EXPECT_EQ(bf16BitsToFloat(floatToBf16Bits(3.0f)), 3.0f);
  EXPECT_TRUE(std::isnan(bf16BitsToFloat(floatToBf16Bits(NAN))));
}

TEST(Tensor, CopiesShareAndCloneCopies) {
  Tensor a = Tensor::fromFloats({2}, {1, 2});
  Tensor view = a;
  Tensor copy = a.clone();
  a.data<float>()[0] = 5;
  EXPECT_EQ(view.at(0), 5);
  EXPECT_EQ(copy.at(0), 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % 64, 0u);
}

TEST(Initializers, DeterministicPerSeedAndName) {
  Variable v;
  v.name = "conv.weight";
  v.type = TensorType(DType::F32, {64, 32, 3, 3});
  v.init = {"kaiming_uniform", {std::sqrt(5.0)}};
  Tensor a = *initialValue(v, 1), b = *initialValue(v, 1), c = *initialValue(v, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // PyTorch's default conv init: bound 1/sqrt(fan_in).
  double bound = 1 / std::sqrt(32.0 * 9), maxAbs = 0, sumSq = 0;
  for (int64_t i = 0; i < a.numElements(); ++i) {
    maxAbs = std::max(maxAbs, std::abs(a.at(i)));
    sumSq += a.at(i) * a.at(i);
  }
  EXPECT_LE(maxAbs, bound);
  EXPECT_GT(maxAbs, 0.99 * bound);
  EXPECT_NEAR(std::sqrt(sumSq / a.numElements()), bound / std::sqrt(3.0), 0.01 * bound);
}

TEST(Initializers, TruncatedNormalStaysInRange) {
  Variable v;
  v.name = "w";
  v.type = TensorType(DType::F32, {10000});
  v.init = {"trunc_normal", {0, 1, -0.5, 0.5}};
  Tensor t = *initialValue(v, 3);
  for (int64_t i = 0; i < t.numElements(); ++i)
    ASSERT_LE(std::abs(t.at(i)), 0.5);
}

TEST(Initializers, UnknownOrElidedIsAnError) {
  Variable v;
  v.name = "w";
  v.type = TensorType(DType::F32, {2});
  v.init = {"elided", {}};
  auto t = initialValue(v, 0);
  ASSERT_FALSE(bool(t));
  EXPECT_NE(llvm::toString(t.takeError()).find("elided"), std::string::npos);
  v.init = {"bogus", {}};
  auto u = initialValue(v, 0);
  ASSERT_FALSE(bool(u));
  EXPECT_NE(llvm::toString(u.takeError()).find("unknown initializer"), std::string::npos);
}

#include "ir/Npy.h"

TEST(Npy, RoundTripsAndRejectsGarbage) {
  Tensor t = Tensor::fromFloats({2, 3}, {1, 2, 3, 4, 5, 6.5f});
  auto bytes = encodeNpy(t);
  ASSERT_TRUE(bool(bytes));
  EXPECT_EQ(bytes->size() % 64, (size_t)t.bytes() % 64) << "header padded to 64 bytes";
  auto back = parseNpy(*bytes);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(*back, t);
  Tensor s = Tensor::fromInts({3}, {1, -2, 3});
  EXPECT_EQ(*parseNpy(*encodeNpy(s)), s);
  auto bad = parseNpy("hello");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("magic"), std::string::npos);
  auto cut = parseNpy(bytes->substr(0, bytes->size() - 4));
  ASSERT_FALSE(bool(cut));
  EXPECT_NE(llvm::toString(cut.takeError()).find("bytes of data"), std::string::npos);
}
