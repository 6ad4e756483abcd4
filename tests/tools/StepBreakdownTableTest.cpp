//===- StepBreakdownTableTest.cpp - The printed step breakdown -------------===//
//
// tools/driver/StepBreakdownTable.h: the op rows under "kernels" add up to
// the kernels row in every column, also for an op type that only a device's
// column has (its kernels overlapped another device's, which the step's
// column names).
//
//===----------------------------------------------------------------------===//

#include "tools/driver/StepBreakdownTable.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

PartTimes kernels(std::map<std::string, double> byOp) {
  PartTimes t;
  for (const auto &[op, us] : byOp)
    t.us[(unsigned)BreakdownPart::Kernel] += us;
  t.kernelUsByOp = std::move(byOp);
  return t;
}

TEST(StepBreakdownTable, EveryColumnsOpTypesHaveARow) {
  StepBreakdown b;
  b.profiledSteps = b.averagedSteps = 1;
  // Relu ran on cpu:1 only while cpu:0's Conv ran: the step's column counts
  // that time as Conv's.
  b.step = kernels({{"Conv", 10000}});
  b.devices = {{"cpu:0", kernels({{"Conv", 10000}})},
               {"cpu:1", kernels({{"Conv", 6000}, {"Relu", 4000}})}};
  std::string text;
  llvm::raw_string_ostream os(text);
  printStepBreakdown(b, os, /*opRows=*/true);
  os.flush();
  size_t relu = text.find("    Relu");
  ASSERT_NE(relu, std::string::npos) << text;
  // step, cpu:0, cpu:1: 0, 0 and 4 ms.
  EXPECT_NE(text.find("0.00   0.0%       0.00   0.0%       4.00  40.0%", relu), std::string::npos)
      << text;
  EXPECT_LT(text.find("    Conv"), relu) << text; // by the step's time first
}

} // namespace
