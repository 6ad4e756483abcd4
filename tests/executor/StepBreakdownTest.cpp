//===- StepBreakdownTest.cpp - A step's time in parts, from timelines -----===//
//
// Synthetic timelines (microseconds chosen so every sum is exact): the
// precedence between overlapping intervals, a stream's wait found from its
// operations' issue times, gaps, copies under kernels, empty steps, the
// whole step over several devices, and the mean over steps.
//
//===----------------------------------------------------------------------===//

#include "executor/StepBreakdown.h"

#include <gtest/gtest.h>

#include <random>

using namespace graphc;

namespace {

using P = BreakdownPart;

PartTimes partsOf(llvm::ArrayRef<Activity> activities, double start, double end) {
  PartTimes t;
  t.add(resolveTimeline(activities, start, end));
  return t;
}

/// Every part, in enum order, for one comparison.
std::vector<double> all(const PartTimes &t) {
  return std::vector<double>(t.us.begin(), t.us.end());
}

std::vector<double> expect(std::initializer_list<std::pair<P, double>> parts) {
  std::vector<double> v(kBreakdownParts, 0.0);
  for (auto [p, us] : parts)
    v[(unsigned)p] += us;
  return v;
}

} // namespace

TEST(StepBreakdown, AKernelHidesTheCopyOnAnotherStream) {
  // Compute runs a kernel 0-10; the copy stream copies in 5-15; the host
  // issues throughout.
  PartTimes t = partsOf(
      {{0, 20, P::LaunchGap}, {0, 10, P::Kernel, "Conv"}, {5, 15, P::CopyHostToDevice}}, 0, 20);
  EXPECT_EQ(all(t), expect({{P::Kernel, 10}, {P::CopyHostToDevice, 5}, {P::LaunchGap, 5}}));
  EXPECT_EQ(t.kernelUsByOp.at("Conv"), 10);
  EXPECT_EQ(t.totalUs(), 20);
}

TEST(StepBreakdown, CopiesUnderKernelsAndCopiesAgainstEachOther) {
  // d2d under the kernel; d2h after it, then overtaken by h2d (higher).
  PartTimes t = partsOf({{0, 10, P::Kernel, "MatMul"},
                         {2, 4, P::CopyDeviceToDevice},
                         {8, 12, P::CopyDeviceToHost},
                         {11, 13, P::CopyHostToDevice}},
                        0, 14);
  EXPECT_EQ(
      all(t),
      expect({{P::Kernel, 10}, {P::CopyDeviceToHost, 1}, {P::CopyHostToDevice, 2}, {P::Other, 1}}));
  EXPECT_EQ(t.totalUs(), 14);
}

TEST(StepBreakdown, AGapAtTheStartIsHostThenLaunchGap) {
  // The host stages the batch 0-2, the worker issues from 2, the first
  // kernel starts at 5, the second leaves 10-12 idle.
  PartTimes t = partsOf({{0, 2, P::Host},
                         {2, 20, P::LaunchGap},
                         {5, 10, P::Kernel, "Conv"},
                         {12, 20, P::Kernel, "Relu"}},
                        0, 20);
  EXPECT_EQ(all(t), expect({{P::Host, 2}, {P::LaunchGap, 5}, {P::Kernel, 13}}));
  EXPECT_EQ(t.kernelUsByOp.at("Conv"), 5);
  EXPECT_EQ(t.kernelUsByOp.at("Relu"), 8);
}

TEST(StepBreakdown, SegmentsAreMaximalAndCoverTheWindow) {
  std::vector<Segment> s = resolveTimeline({{0, 4, P::Kernel, "Conv"},
                                            {4, 8, P::Kernel, "Conv"},
                                            {8, 9, P::Kernel, "Relu"},
                                            {-5, 30, P::LaunchGap}},
                                           1, 10);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].startUs, 1);
  EXPECT_EQ(s[0].endUs, 8);
  EXPECT_EQ(s[0].op, "Conv");
  EXPECT_EQ(s[1].op, "Relu");
  EXPECT_EQ(s[2].part, P::LaunchGap);
  EXPECT_EQ(s[2].endUs, 10);
}

TEST(StepBreakdown, AStreamWaitsFromItsIssueOrItsPreviousEndToItsStart) {
  // Compute: A 0-4; B issued at 2 but made to wait for another stream's
  // event, so it starts at 10: the stream waited 4-10.
  std::vector<Activity> waits;
  addStreamWaits({{0, 4, 0, false}, {10, 14, 2, true}}, waits);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].startUs, 4);
  EXPECT_EQ(waits[0].endUs, 10);
  EXPECT_EQ(waits[0].part, P::Wait);
  // Issued only at 6: 4-6 is the host's (a launch gap), 6-10 the wait.
  waits.clear();
  addStreamWaits({{0, 4, 0, false}, {10, 14, 6, true}}, waits);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].startUs, 6);
  // Not made to wait: a late start is launch latency, no wait.
  waits.clear();
  addStreamWaits({{0, 4, 0, false}, {10, 14, 2, false}}, waits);
  EXPECT_TRUE(waits.empty());
  // Made to wait, but queued behind the previous operation: no idle time.
  addStreamWaits({{0, 4, 0, false}, {4, 14, 2, true}}, waits);
  EXPECT_TRUE(waits.empty());
  // The step's first operation waits from its issue.
  addStreamWaits({{5, 6, 1, true}}, waits);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].startUs, 1);
  EXPECT_EQ(waits[0].endUs, 5);
}

TEST(StepBreakdown, AWaitShowsOnlyWhereItLeavesTheDeviceIdle) {
  // Copy-in waits 0-6 for compute (which runs 0-4), then copies 6-8.
  std::vector<Activity> a = {
      {0, 10, P::LaunchGap}, {0, 4, P::Kernel, "Conv"}, {6, 8, P::CopyDeviceToDevice}};
  addStreamWaits({{6, 8, 0, true}}, a);
  PartTimes t = partsOf(a, 0, 10);
  EXPECT_EQ(all(t),
            expect({{P::Kernel, 4}, {P::Wait, 2}, {P::CopyDeviceToDevice, 2}, {P::LaunchGap, 2}}));
}

TEST(StepBreakdown, AnEmptyStep) {
  EXPECT_TRUE(resolveTimeline({{0, 5, P::Kernel, "Conv"}}, 3, 3).empty());
  PartTimes idle = partsOf({}, 0, 5);
  EXPECT_EQ(all(idle), expect({{P::Other, 5}}));
  // Intervals wholly outside the window count for nothing.
  PartTimes outside = partsOf({{10, 20, P::Kernel, "Conv"}, {-3, -1, P::Host}}, 0, 5);
  EXPECT_EQ(all(outside), expect({{P::Other, 5}}));
}

TEST(StepBreakdown, TheWholeStepIsTheHighestPartOfAnyDevice) {
  RunTimeline run;
  run.startUs = 0;
  run.endUs = 10;
  run.devices = {{"gpu:1", {{0, 8, P::Wait}, {8, 10, P::Kernel, "Relu"}}},
                 {"gpu:0", {{0, 5, P::Kernel, "Conv"}, {5, 10, P::Wait}}}};
  ResolvedRun r = resolveRun(run);
  PartTimes step, gpu1;
  step.add(r.stepSegments);
  gpu1.add(r.deviceSegments[0]);
  EXPECT_EQ(all(step), expect({{P::Kernel, 7}, {P::Wait, 3}}));
  EXPECT_EQ(all(gpu1), expect({{P::Kernel, 2}, {P::Wait, 8}}));
}

TEST(StepBreakdown, OverlappingKernelsGoToTheFirstStarted) {
  RunTimeline run;
  run.startUs = 0;
  run.endUs = 8;
  run.devices = {{"gpu:0", {{2, 8, P::Kernel, "Conv"}}}, {"gpu:1", {{0, 4, P::Kernel, "Add"}}}};
  PartTimes step;
  step.add(resolveRun(run).stepSegments);
  EXPECT_EQ(step.kernelUsByOp.at("Add"), 4);
  EXPECT_EQ(step.kernelUsByOp.at("Conv"), 4);
  EXPECT_EQ(step[P::Kernel], 8);
}

TEST(StepBreakdown, TheMeanLeavesOutTheFirstStepAndAddsMicroSteps) {
  auto run = [](uint64_t step, int micro, double start, double kernel, double end) {
    RunTimeline r;
    r.step = step;
    r.micro = micro;
    r.startUs = start;
    r.endUs = end;
    r.devices = {{"cpu:0", {{start, start + kernel, P::Kernel, "Conv"}, {start, end, P::Host}}}};
    return resolveRun(r);
  };
  // Step 0 (setup: 100), then steps 1 and 2 of two runs each (a micro-step
  // and the main run).
  std::vector<ResolvedRun> runs = {run(0, -1, 0, 90, 100), run(1, 0, 100, 6, 110),
                                   run(1, -1, 110, 6, 120), run(2, 0, 120, 2, 130),
                                   run(2, -1, 130, 2, 140)};
  StepBreakdown b = summarizeRuns(runs);
  EXPECT_EQ(b.profiledSteps, 3u);
  EXPECT_EQ(b.averagedSteps, 2u);
  EXPECT_EQ(b.firstAveraged, 1u);
  EXPECT_EQ(b.lastAveraged, 2u);
  EXPECT_EQ(b.firstStepUs, 100);
  EXPECT_EQ(b.step.totalUs(), 20);
  EXPECT_EQ(b.step[P::Kernel], 8);
  EXPECT_EQ(b.step[P::Host], 12);
  ASSERT_EQ(b.devices.size(), 1u);
  EXPECT_EQ(b.devices[0].second.kernelUsByOp.at("Conv"), 8);
  // One step alone is its own mean.
  StepBreakdown one = summarizeRuns({runs[0]});
  EXPECT_EQ(one.averagedSteps, 1u);
  EXPECT_EQ(one.step.totalUs(), 100);
  EXPECT_EQ(summarizeRuns({}).averagedSteps, 0u);
}

TEST(StepBreakdown, ThePartsAlwaysAddUpToTheWindow) {
  std::mt19937 rng(29);
  std::uniform_real_distribution<double> at(-10, 110);
  std::uniform_int_distribution<int> part(0, kBreakdownParts - 2);
  for (int round = 0; round < 200; ++round) {
    std::vector<Activity> a;
    for (int i = 0, n = round % 17; i < n; ++i) {
      double x = at(rng), y = at(rng);
      a.push_back({std::min(x, y), std::max(x, y), (P)part(rng), "Op"});
    }
    std::vector<Segment> s = resolveTimeline(a, 0, 100);
    PartTimes t;
    t.add(s);
    EXPECT_NEAR(t.totalUs(), 100, 1e-9) << "round " << round;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      EXPECT_EQ(s[i].endUs, s[i + 1].startUs);
      EXPECT_FALSE(s[i].part == s[i + 1].part && s[i].op == s[i + 1].op);
    }
  }
}
