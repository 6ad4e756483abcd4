#include "executor/StepTimes.h"
#include "executor/Collectives.h"
#include "executor/Executor.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

#include <chrono>

using namespace graphc;

TEST(StepClock, WallTimeGoesToTheHighestPartInProgress) {
  double now = 0;
  StepClock clock([&] { return now; });
  clock.start();
  now = 1;
  clock.enter(StepPart::IntraWorker);
  now = 2;
  clock.enter(StepPart::InterWorker); // inside the collective: its sum across workers
  now = 3;
  clock.leave(StepPart::InterWorker);
  now = 4;
  clock.enter(StepPart::Input); // another thread stages input while the collective runs
  now = 5;
  clock.leave(StepPart::IntraWorker);
  now = 6;
  clock.leave(StepPart::Input);
  now = 10;
  StepTimes t = clock.finish();
  EXPECT_EQ(t.compute, 1 + 4);     // 0-1, 6-10
  EXPECT_EQ(t.intraWorker, 1 + 2); // 1-2, 3-5 (over the input staged at 4-5)
  EXPECT_EQ(t.interWorker, 1);     // 2-3
  EXPECT_EQ(t.input, 1);           // 5-6
  EXPECT_EQ(t.total(), 10);

  // Two threads in the same part count its wall time once; a new step starts
  // from zero.
  clock.start();
  now = 11;
  clock.enter(StepPart::IntraWorker);
  clock.enter(StepPart::IntraWorker);
  now = 12;
  clock.leave(StepPart::IntraWorker);
  now = 13;
  clock.leave(StepPart::IntraWorker);
  now = 14;
  t = clock.finish();
  EXPECT_EQ(t.intraWorker, 2);
  EXPECT_EQ(t.compute, 2);
  EXPECT_EQ(t.input + t.interWorker, 0);
}

namespace {

/// Stands for the other workers: adds nothing, but takes a measurable moment
/// (it returns once the clock has moved, so the test needs no sleep).
class IdleWorkers final : public CrossWorkerReducer {
public:
  unsigned numWorkers() const override { return 2; }
  llvm::Error prepareGroups(llvm::ArrayRef<std::string>) override { return llvm::Error::success(); }
  llvm::Error allReduceSum(llvm::StringRef, llvm::ArrayRef<TensorView>, llvm::StringRef) override {
    auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() == start) {
    }
    ++calls;
    return llvm::Error::success();
  }
  int calls = 0;
};

} // namespace

TEST(Executor, StepTimesSplitStagingCollectivesAndTheSumAcrossWorkers) {
  // x is fed on cpu:0 and copied to cpu:1 (staging); each device doubles its
  // copy and the two sum it in a collective marked `workers`.
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {1 << 12}));
  x->producer()->setAssignedDevice(DeviceId::host());
  Attrs t;
  t.set("to", std::string("cpu:1"));
  Node *copy = b.createNode(Op::Transfer, {x}, t, "to1");
  copy->setAssignedDevice(DeviceId::cpu(1));
  for (int r = 0; r < 2; ++r) {
    const DeviceId dev = DeviceId::cpu((unsigned)r);
    Value *in = r == 0 ? x : copy->result();
    Value *doubled = b.create(Op::Add, {in, in});
    doubled->producer()->setAssignedDevice(dev);
    Attrs a;
    a.set("group", std::string("g"));
    a.set("rank", (int64_t)r);
    a.set("nranks", (int64_t)2);
    a.set("workers", (int64_t)2);
    Node *ar = b.createNode(Op::AllReduce, {doubled}, a, "ar" + std::to_string(r));
    ar->setAssignedDevice(dev);
    m.main().addOutput(ar->result());
  }
  IdleWorkers workers;
  ExecutorOptions opts;
  opts.threads = 2;
  opts.acrossWorkers = &workers;
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  llvm::StringMap<Tensor> feeds;
  feeds["x"] = Tensor(TensorType(DType::F32, {1 << 12}));
  for (int step = 0; step < 2; ++step) {
    auto out = (*ex)->run(feeds);
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    const StepTimes &s = (*ex)->lastStepTimes();
    EXPECT_GT(s.input, 0);
    EXPECT_GT(s.intraWorker, 0);
    EXPECT_GT(s.interWorker, 0);
    EXPECT_GE(s.compute, 0);
  }
  EXPECT_EQ(workers.calls, 2);

  // Alone, nothing goes between workers.
  for (const char *name : {"ar0", "ar1"})
    m.main().findNode(name)->attrs().set("workers", (int64_t)1);
  opts.acrossWorkers = nullptr;
  auto alone = Executor::create(m, opts);
  ASSERT_TRUE(bool(alone)) << llvm::toString(alone.takeError());
  ASSERT_TRUE(bool((*alone)->run(feeds)));
  EXPECT_EQ((*alone)->lastStepTimes().interWorker, 0);
  EXPECT_GT((*alone)->lastStepTimes().intraWorker, 0);
}
