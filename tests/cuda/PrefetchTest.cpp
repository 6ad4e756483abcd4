//===- PrefetchTest.cpp - Executor::prefetch and the CUDA graph option -----===//
//
// Prefetched inputs are consumed in order by run({}), on host devices here
// (the GPU path is in CudaExecutorTest.cpp); misuse is an error that says
// what to do; CUDA graphs on host devices: auto runs as usual, on is an error
// with the reason.
//
//===----------------------------------------------------------------------===//

#include "executor/Executor.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {
/// out = x * 2 + y, x on cpu:0 and y on cpu:1 (a transfer between them).
void buildTwoDevices(Module &m) {
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {5}));
  x->producer()->setAssignedDevice(DeviceId::host());
  Value *y = b.input("y", TensorType(DType::F32, {5}));
  y->producer()->setAssignedDevice(DeviceId::cpu(1));
  Node *twice = b.createNode(Op::Add, {x, x}, {}, "twice");
  twice->setAssignedDevice(DeviceId::host());
  Attrs t;
  t.set("to", std::string("cpu:1"));
  Node *copy = b.createNode(Op::Transfer, {twice->result()}, t, "copy");
  copy->setAssignedDevice(DeviceId::cpu(1));
  Node *sum = b.createNode(Op::Add, {copy->result(), y}, {}, "sum");
  sum->setAssignedDevice(DeviceId::cpu(1));
  m.main().addOutput(sum->result());
}

llvm::StringMap<Tensor> batch(float v) {
  llvm::StringMap<Tensor> f;
  f["x"] = Tensor::fromFloats({5}, {v, v + 1, v + 2, v + 3, v + 4});
  f["y"] = Tensor::fromFloats({5}, {100, 100, 100, 100, 100});
  return f;
}
} // namespace

TEST(Prefetch, StepsRunOnPrefetchedInputsInOrder) {
  Module m;
  buildTwoDevices(m);
  ExecutorOptions opts;
  opts.threads = 2;
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  ASSERT_FALSE((*ex)->prefetch(batch(0)));
  for (int step = 0; step < 5; ++step) {
    if (step < 4) {
      ASSERT_FALSE((*ex)->prefetch(batch(10 * (step + 1))));
    }
    auto out = (*ex)->run({});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ((*out)[0].at(i), 2.0 * (10 * step + i) + 100) << "step " << step;
  }
  // Nothing prefetched any more: run({}) asks for the feeds.
  auto none = (*ex)->run({});
  ASSERT_FALSE(bool(none));
  EXPECT_NE(llvm::toString(none.takeError()).find("was not fed"), std::string::npos);
  // Plain feeds still work.
  auto plain = (*ex)->run(batch(1));
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_EQ((*plain)[0].at(0), 102.0);
}

TEST(Prefetch, MisuseIsAnErrorThatSaysWhatToDo) {
  Module m;
  buildTwoDevices(m);
  auto ex = Executor::create(m, {});
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  llvm::StringMap<Tensor> bad = batch(0);
  bad["x"] = Tensor::fromFloats({2}, {1, 2});
  llvm::Error e = (*ex)->prefetch(bad);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("'x' expects f32[5], was fed f32[2]"),
            std::string::npos);
  ASSERT_FALSE((*ex)->prefetch(batch(0)));
  ASSERT_FALSE((*ex)->prefetch(batch(1)));
  llvm::Error third = (*ex)->prefetch(batch(2));
  ASSERT_TRUE(bool(third));
  EXPECT_NE(llvm::toString(std::move(third)).find("already prefetched"), std::string::npos);
  auto mixed = (*ex)->run(batch(3));
  ASSERT_FALSE(bool(mixed));
  EXPECT_NE(llvm::toString(mixed.takeError()).find("run them with run({}) first"),
            std::string::npos);
  // The executor is still usable: both prefetched steps run.
  for (int step = 0; step < 2; ++step) {
    auto out = (*ex)->run({});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ((*out)[0].at(0), 2.0 * step + 100);
  }
}

TEST(CudaGraphsOption, OnHostDevicesAutoRunsAsUsualAndOnIsAnError) {
  Module m;
  buildTwoDevices(m);
  ExecutorOptions opts;
  auto plain = Executor::create(m, opts);
  ASSERT_TRUE(bool(plain));
  EXPECT_EQ((*plain)->cudaGraphNote(), "") << "not asked for";
  // Auto on host devices alone: nothing to capture, nothing to say.
  opts.cudaGraphs = CudaGraphs::Auto;
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  EXPECT_EQ((*ex)->cudaGraphNote(), "");
  for (int step = 0; step < 3; ++step) {
    auto out = (*ex)->run(batch(step));
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ((*out)[0].at(0), 2.0 * step + 100);
  }
  // On: the step cannot be a graph, and the error says why.
  opts.cudaGraphs = CudaGraphs::On;
  auto on = Executor::create(m, opts);
  ASSERT_FALSE(bool(on));
  std::string why = llvm::toString(on.takeError());
  EXPECT_EQ(why.rfind("CUDA graphs were asked for (on), but the step cannot be one: ", 0), 0u)
      << why;
#if GRAPHC_HAVE_CUDA
  // It names the host device and work of its own there.
  EXPECT_NE(why.find("host device too (a graph holds GPU work only): cpu:0 runs 2 of its nodes, "
                     "'twice' (Add) among them"),
            std::string::npos)
      << why;
#else
  EXPECT_NE(why.find("no CUDA backend"), std::string::npos) << why;
#endif
}

TEST(CudaGraphsOption, ModesParseOnce) {
  for (CudaGraphs g : {CudaGraphs::Off, CudaGraphs::Auto, CudaGraphs::On}) {
    auto parsed = parseCudaGraphs(cudaGraphsName(g));
    ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
    EXPECT_EQ(*parsed, g);
  }
  auto bad = parseCudaGraphs("yes");
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()), "unknown CUDA graphs mode 'yes' (auto, on or off)");
}
