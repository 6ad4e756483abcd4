//===- ModesTest.cpp - --params, --bn, --remainder, --split parsed once -----===//

#include "ir/Modes.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

template <typename T> std::string errorOf(llvm::Expected<T> v) {
  if (v) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(v.takeError());
}

TEST(Modes, ParamPlacements) {
  EXPECT_EQ(*parseParamPlacement("cpu"), ParamPlacement{ParamPlacement::Cpu});
  EXPECT_EQ(*parseParamPlacement("spread"), ParamPlacement{ParamPlacement::Spread});
  EXPECT_EQ(*parseParamPlacement("mirrored"), ParamPlacement{ParamPlacement::Mirrored});
  EXPECT_EQ(*parseParamPlacement("gpu:2"), ParamPlacement::onGpu(2));
  EXPECT_EQ(*parseParamPlacement("auto"), ParamPlacement{ParamPlacement::Auto});
  for (const char *name : {"cpu", "spread", "mirrored", "gpu:2", "auto"})
    EXPECT_EQ(modeName(*parseParamPlacement(name)), name);
  for (const char *bad : {"gpu", "gpu:", "cpu:1", "Mirrored", ""})
    EXPECT_EQ(errorOf(parseParamPlacement(bad)),
              "unknown parameter mode '" + std::string(bad) +
                  "'; known: cpu, gpu:K, spread, mirrored, auto");
}

TEST(Modes, BatchNormAndRemainder) {
  for (const char *name : {"local", "sync", "frozen"})
    EXPECT_EQ(modeName(*parseBnMode(name)), name);
  for (const char *name : {"error", "drop", "uneven"})
    EXPECT_EQ(modeName(*parseRemainderPolicy(name)), name);
  EXPECT_EQ(errorOf(parseBnMode("global")),
            "unknown batch norm mode 'global'; known: local, sync, frozen");
  EXPECT_EQ(errorOf(parseRemainderPolicy("pad")),
            "unknown remainder policy 'pad'; known: error, drop, uneven");
}

TEST(Modes, SplitWeights) {
  auto s = parseSplitSpec("4, 4,2.5");
  ASSERT_TRUE(bool(s));
  EXPECT_EQ(s->kind, SplitSpec::Weights);
  EXPECT_EQ(s->weights, (std::vector<double>{4, 4, 2.5}));
  EXPECT_EQ(modeName(*s), "4,4,2.5");
  EXPECT_EQ(modeName(SplitSpec()), "even");
  EXPECT_EQ(parseSplitSpec("auto")->kind, SplitSpec::Auto);
  EXPECT_EQ(modeName(*parseSplitSpec("auto")), "auto");
  for (const char *bad : {"4,-1", "4,,2", "a", "inf,1", "nan"})
    EXPECT_EQ(errorOf(parseSplitSpec(bad)),
              "--split takes 'auto' or non-negative weights such as 4,4,2")
        << bad;
}

} // namespace
