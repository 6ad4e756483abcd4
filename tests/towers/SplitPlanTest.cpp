//===- SplitPlanTest.cpp - How the global batch is cut into towers ----------===//

#include "passes/BatchSplit.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

CompileOptions options(int towers, const std::string &remainder, std::vector<double> weights = {}) {
  CompileOptions o;
  o.towers = towers;
  o.remainder = cantFail(parseRemainderPolicy(remainder));
  if (!weights.empty())
    o.split = {SplitSpec::Weights, std::move(weights)};
  return o;
}

std::vector<int64_t> sizes(int64_t batch, const CompileOptions &o) {
  auto s = planBatchSplit(batch, towerOptions(o));
  if (!s) {
    ADD_FAILURE() << llvm::toString(s.takeError());
    return {};
  }
  int64_t sum = 0;
  for (int64_t v : s->sizes)
    sum += v;
  EXPECT_EQ(sum, s->global);
  return std::vector<int64_t>(s->sizes.begin(), s->sizes.end());
}

std::string error(int64_t batch, const CompileOptions &o) {
  auto s = planBatchSplit(batch, towerOptions(o));
  if (s) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(s.takeError());
}

using V = std::vector<int64_t>;

TEST(SplitPlan, EvenBatchesSplitAlikeUnderEveryPolicy) {
  for (const char *policy : {"error", "drop", "uneven"})
    EXPECT_EQ(sizes(12, options(4, policy)), (V{3, 3, 3, 3})) << policy;
  EXPECT_EQ(sizes(5, options(1, "error")), (V{5}));
}

TEST(SplitPlan, UnevenGivesTheFirstTowersOneMore) {
  EXPECT_EQ(sizes(7, options(4, "uneven")), (V{2, 2, 2, 1}));
  EXPECT_EQ(sizes(10, options(3, "uneven")), (V{4, 3, 3}));
}

TEST(SplitPlan, UnevenLeavesTowersEmptyWhenTheBatchIsSmall) {
  EXPECT_EQ(sizes(3, options(4, "uneven")), (V{1, 1, 1, 0}));
}

TEST(SplitPlan, DropShrinksTheGlobalBatchToAMultiple) {
  auto s = planBatchSplit(7, towerOptions(options(4, "drop")));
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  EXPECT_EQ(s->global, 4);
  EXPECT_EQ(V(s->sizes.begin(), s->sizes.end()), (V{1, 1, 1, 1}));
}

TEST(SplitPlan, ErrorNamesTheBatchTheTowersAndThePolicies) {
  std::string e = error(7, options(4, "error"));
  EXPECT_NE(e.find("global batch of 7"), std::string::npos) << e;
  EXPECT_NE(e.find("4 towers"), std::string::npos) << e;
  EXPECT_NE(e.find("--remainder error"), std::string::npos) << e;
  EXPECT_NE(e.find("drop (a global batch of 4)"), std::string::npos) << e;
  EXPECT_NE(e.find("uneven (tower batches 2,2,2,1)"), std::string::npos) << e;
}

TEST(SplitPlan, ABatchSmallerThanTheTowersIsAnErrorUnderErrorAndDrop) {
  std::string e = error(3, options(4, "error"));
  EXPECT_NE(e.find("global batch of 3 is smaller than the 4 towers"), std::string::npos) << e;
  EXPECT_NE(e.find("uneven (tower batches 1,1,1,0)"), std::string::npos) << e;
  std::string d = error(3, options(4, "drop"));
  EXPECT_NE(d.find("drop (impossible: no sample would be left)"), std::string::npos) << d;
}

TEST(SplitPlan, WeightsForMixedDevices) {
  EXPECT_EQ(sizes(10, options(3, "error", {4, 4, 2})), (V{4, 4, 2}));
  // 11 · (0.4, 0.4, 0.2) = (4.4, 4.4, 2.2): the one left over goes to the
  // largest remainder, the lower tower on a tie.
  EXPECT_EQ(sizes(11, options(3, "uneven", {4, 4, 2})), (V{5, 4, 2}));
  EXPECT_EQ(sizes(11, options(3, "drop", {4, 4, 2})), (V{4, 4, 2}));
  std::string e = error(11, options(3, "error", {4, 4, 2}));
  EXPECT_NE(e.find("with weights 4,4,2"), std::string::npos) << e;
  EXPECT_EQ(sizes(6, options(2, "uneven", {1, 0})), (V{6, 0}));
}

TEST(SplitPlan, BadOptionsAreErrors) {
  EXPECT_NE(error(8, options(0, "uneven")).find("--towers must be at least 1"), std::string::npos);
  EXPECT_NE(error(8, options(3, "uneven", {1, 2})).find("2 weights for 3 towers"),
            std::string::npos);
  EXPECT_NE(error(8, options(2, "uneven", {1, -1})).find("non-negative"), std::string::npos);
  EXPECT_NE(error(8, options(2, "uneven", {0, 0})).find("must not all be zero"), std::string::npos);
}

} // namespace
