//===- CudaExecutorTest.cpp - Steps on GPU devices ------------------------===//
//
// The executor over CUDA devices: one GPU against the CPU, four logical
// towers on one GPU with transfers, an all-reduce and a host device, the
// same with the host's input and output staged on a GPU, the prefetch path,
// CUDA graph capture and replay (dropout's masks through the device's step
// counter), the trace tracks and the step breakdown of a profiled step.
// Skipped ("no CUDA device") where no GPU is usable.
//
//===----------------------------------------------------------------------===//

#include "CudaTestSupport.h"

#include "executor/Executor.h"
#include "ir/Builder.h"

using namespace graphc;

namespace {
Attrs allReduce(const std::string &group, int rank, int nranks) {
  Attrs a;
  a.set("group", group);
  a.set("rank", (int64_t)rank);
  a.set("nranks", (int64_t)nranks);
  return a;
}

Node *place(Node *n, DeviceId device) {
  n->setAssignedDevice(device);
  return n;
}

/// x (on `inputDevice`) goes to gpu:0..3, each tower computes relu(x*w + c)
/// with its own copy of w, the towers all-reduce, and the sum comes back to
/// `outputDevice`.
void buildTowers(Module &m, DeviceId inputDevice, DeviceId outputDevice, int64_t n = 4096) {
  Variable w;
  w.name = "w";
  w.type = TensorType(DType::F32, {n});
  std::vector<float> wv(n);
  for (int64_t i = 0; i < n; ++i)
    wv[i] = (float)((i % 7) - 3) * 0.25f;
  w.data = Tensor::fromFloats({n}, wv);
  m.addVariable(w);
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {n}));
  place(x->producer(), inputDevice);
  std::vector<Node *> reduces;
  for (int r = 0; r < 4; ++r) {
    const DeviceId dev = DeviceId::gpu((unsigned)r);
    Attrs t;
    t.set("to", dev.str());
    Node *copy = place(b.createNode(Op::Transfer, {x}, t, "to" + std::to_string(r)), dev);
    Node *wr = place(b.variable("w")->producer(), dev);
    Node *mul = place(b.createNode(Op::Mul, {copy->result(), wr->result()}), dev);
    Node *add = place(b.createNode(Op::Add, {mul->result(), copy->result()}), dev);
    Node *relu = place(b.createNode(Op::Relu, {add->result()}), dev);
    reduces.push_back(place(b.createNode(Op::AllReduce, {relu->result()}, allReduce("towers", r, 4),
                                         "ar" + std::to_string(r)),
                            dev));
  }
  Attrs t;
  t.set("to", outputDevice.str());
  Node *back = place(b.createNode(Op::Transfer, {reduces[2]->result()}, t, "back"), outputDevice);
  m.main().addOutput(back->result());
}

std::vector<float> inputs(int64_t n, float base) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = base + (float)(i % 13) - 6;
  return x;
}

std::vector<float> expected(const std::vector<float> &x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    float w = (float)(((int64_t)i % 7) - 3) * 0.25f;
    volatile float product = x[i] * w; // two kernels: no fused multiply-add
    float t = std::max(0.f, product + x[i]);
    y[i] = (((0.f + t) + t) + t) + t; // the reduction's order, from rank 0
  }
  return y;
}

llvm::StringMap<Tensor> feed(int64_t n, float base) {
  llvm::StringMap<Tensor> f;
  f["x"] = Tensor::fromFloats({n}, inputs(n, base));
  return f;
}

ExecutorOptions onOneGpu() {
  ExecutorOptions o;
  o.physicalGpu = [](DeviceId) { return 0; };
  o.waitTimeout = std::chrono::seconds(60);
  return o;
}

void expectStep(Executor &ex, const llvm::StringMap<Tensor> &feeds, float base, int64_t n,
                bool prefetched = false) {
  auto out = ex.run(prefetched ? llvm::StringMap<Tensor>() : feeds);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  std::vector<float> want = expected(inputs(n, base));
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ((*out)[0].at(i), want[i]) << "element " << i << " base " << base;
}
} // namespace

TEST(CudaExecutor, OneGpuAgreesWithTheCpu) {
  GRAPHC_REQUIRE_GPUS(1);
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {3, 5}));
  Value *y = b.create(Op::Relu, {b.create(Op::Mul, {x, b.create(Op::Add, {x, x})})});
  m.main().addOutput(y);
  auto cpu = Executor::create(m, {});
  ASSERT_TRUE(bool(cpu)) << llvm::toString(cpu.takeError());
  ExecutorOptions gpu;
  gpu.deviceMap = [](DeviceId) { return DeviceId::gpu(0); };
  auto ex = Executor::create(m, gpu);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  EXPECT_EQ((*ex)->devices(), (std::vector<std::string>{"gpu:0"}));
  llvm::StringMap<Tensor> f;
  f["x"] = Tensor::fromFloats({3, 5}, {-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  auto a = (*cpu)->run(f);
  auto g = (*ex)->run(f);
  ASSERT_TRUE(a && g);
  EXPECT_EQ((*a)[0], (*g)[0]);
}

TEST(CudaExecutor, FourLogicalTowersOnOneGpuWithHostInputAndOutput) {
  GRAPHC_REQUIRE_GPUS(1);
  const int64_t n = 4096 + 3;
  Module m;
  buildTowers(m, DeviceId::host(), DeviceId::host(), n);
  ExecutorOptions opts = onOneGpu();
  opts.batchOnDevice = false; // the host input and output as the plan has them
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  EXPECT_EQ((*ex)->devices(),
            (std::vector<std::string>{"cpu:0", "gpu:0", "gpu:1", "gpu:2", "gpu:3"}));
  for (int step = 0; step < 3; ++step)
    expectStep(**ex, feed(n, (float)step), (float)step, n);
}

TEST(CudaExecutor, AHostInputOnlyGpusReadIsStagedOnAGpuAndTheStepIsAGraph) {
  // The same plan with the input and output on the host: the executor runs
  // them on gpu:0 (BatchStaging.h), so no host device is left, and the step
  // becomes one CUDA graph.
  GRAPHC_REQUIRE_GPUS(1);
  const int64_t n = 4096 + 3;
  Module m;
  buildTowers(m, DeviceId::host(), DeviceId::host(), n);
  ExecutorOptions opts = onOneGpu();
  opts.cudaGraphs = CudaGraphs::On;
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  EXPECT_EQ((*ex)->devices(), (std::vector<std::string>{"gpu:0", "gpu:1", "gpu:2", "gpu:3"}));
  for (int step = 0; step < 4; ++step)
    expectStep(**ex, feed(n, (float)step), (float)step, n);
  EXPECT_NE((*ex)->cudaGraphNote().find("later steps replay it"), std::string::npos)
      << (*ex)->cudaGraphNote();
  ASSERT_FALSE((*ex)->prefetch(feed(n, 7)));
  expectStep(**ex, {}, 7, n, true);
}

TEST(CudaExecutor, CapturedDropoutDrawsEveryReplayedStepsMasks) {
  // The masks come from the device's step counter, which the graph advances:
  // eager, captured and replayed steps all draw the CPU's masks of their
  // step, and a step moved by setStep too.
  GRAPHC_REQUIRE_GPUS(1);
  const int64_t n = 3 * 4096 + 5;
  Module m;
  Builder b(m.main());
  b.setTower(1);
  Value *x = b.input("x", TensorType(DType::F32, {n}));
  Attrs a;
  a.set("ratio", 0.4);
  Node *drop = b.createNode(Op::DropoutTrain, {x}, a, "tower_1/drop");
  m.main().addOutput(drop->result(1));
  ExecutorOptions cpuOpts;
  cpuOpts.seed = 5;
  auto cpu = Executor::create(m, cpuOpts);
  ASSERT_TRUE(bool(cpu)) << llvm::toString(cpu.takeError());
  ExecutorOptions gpuOpts = onOneGpu();
  gpuOpts.seed = 5;
  gpuOpts.deviceMap = [](DeviceId) { return DeviceId::gpu(0); };
  for (CudaGraphs mode : {CudaGraphs::Off, CudaGraphs::On}) {
    gpuOpts.cudaGraphs = mode;
    auto gpu = Executor::create(m, gpuOpts);
    ASSERT_TRUE(bool(gpu)) << llvm::toString(gpu.takeError());
    (*cpu)->setStep(0);
    for (int step = 0; step < 7; ++step) {
      if (step == 5) { // a resumed run: the counter is set outside the graph
        (*cpu)->setStep(40);
        (*gpu)->setStep(40);
      }
      llvm::StringMap<Tensor> f;
      f["x"] = Tensor::fromFloats({n}, std::vector<float>(n, 1.0f));
      auto want = (*cpu)->run(f);
      auto got = (*gpu)->run(f);
      ASSERT_TRUE(want && got);
      EXPECT_EQ((*got)[0], (*want)[0]) << cudaGraphsName(mode).str() << " step " << step;
    }
    if (mode == CudaGraphs::On) {
      EXPECT_NE((*gpu)->cudaGraphNote().find("later steps replay it"), std::string::npos)
          << (*gpu)->cudaGraphNote();
    }
  }
}

TEST(CudaExecutor, AllOnGpusWithPrefetchedInputs) {
  GRAPHC_REQUIRE_GPUS(1);
  const int64_t n = 100000;
  Module m;
  buildTowers(m, DeviceId::gpu(0), DeviceId::gpu(1), n);
  auto ex = Executor::create(m, onOneGpu());
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  ASSERT_FALSE((*ex)->prefetch(feed(n, 0)));
  for (int step = 0; step < 4; ++step) {
    if (step < 3) {
      ASSERT_FALSE((*ex)->prefetch(feed(n, (float)step + 1)));
    }
    expectStep(**ex, {}, (float)step, n, /*prefetched=*/true);
  }
}

TEST(CudaExecutor, CudaGraphsCaptureTheSecondStepAndReplayIt) {
  GRAPHC_REQUIRE_GPUS(1);
  const int64_t n = 50000;
  Module m;
  buildTowers(m, DeviceId::gpu(0), DeviceId::gpu(2), n);
  ExecutorOptions opts = onOneGpu();
  opts.cudaGraphs = CudaGraphs::On;
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  EXPECT_NE((*ex)->cudaGraphNote().find("captured"), std::string::npos) << (*ex)->cudaGraphNote();
  for (int step = 0; step < 5; ++step) {
    // New inputs every step: a replay reads the step's input buffers.
    expectStep(**ex, feed(n, (float)step * 3), (float)step * 3, n);
    if (step == 1) {
      EXPECT_NE((*ex)->cudaGraphNote().find("later steps replay it"), std::string::npos)
          << (*ex)->cudaGraphNote();
    }
  }
  // Prefetched inputs feed replays too.
  ASSERT_FALSE((*ex)->prefetch(feed(n, 100)));
  expectStep(**ex, {}, 100, n, true);
}

TEST(CudaExecutor, TheTraceHasATrackPerGpuStream) {
  GRAPHC_REQUIRE_GPUS(1);
  const int64_t n = 8192;
  Module m;
  buildTowers(m, DeviceId::host(), DeviceId::host(), n);
  ExecutorOptions opts = onOneGpu();
  opts.profile = true;
  opts.batchOnDevice = false; // copies from and to the host, on their tracks
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  for (int step = 0; step < 2; ++step)
    expectStep(**ex, feed(n, 1), 1, n);
  std::map<std::string, size_t> events;
  for (const TraceTrack &t : (*ex)->trace().tracks())
    events[t.device + " " + t.stream] += t.events.size();
  for (int r = 0; r < 4; ++r) {
    std::string d = "gpu:" + std::to_string(r);
    EXPECT_GT(events[d + " compute"], 0u) << d;
    EXPECT_GT(events[d + " copy-in"], 0u) << d << ": the transfer from cpu:0";
    EXPECT_GT(events[d + " collective"], 0u) << d;
  }
  EXPECT_GT(events["cpu:0 copy"], 0u) << "the transfer back to the host";
}

TEST(CudaExecutor, AProfiledStepsBreakdownAddsUpToTheStep) {
  GRAPHC_REQUIRE_GPUS(1);
  const int64_t n = 1 << 20;
  Module m;
  buildTowers(m, DeviceId::host(), DeviceId::host(), n);
  ExecutorOptions opts = onOneGpu();
  opts.profile = true;
  opts.batchOnDevice = false; // host copies in and out: every kind of part
  auto ex = Executor::create(m, opts);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  for (int step = 0; step < 3; ++step)
    expectStep(**ex, feed(n, 1), 1, n);
  const TraceRecorder &trace = (*ex)->trace();
  ASSERT_EQ(trace.runs().size(), 3u);
  double meanUs = 0;
  for (size_t r = 1; r < 3; ++r)
    meanUs += (trace.runs()[r].endUs - trace.runs()[r].startUs) / 2;
  StepBreakdown b = trace.breakdown();
  EXPECT_EQ(b.averagedSteps, 2u);
  EXPECT_NEAR(b.step.totalUs(), meanUs, 1e-6 * meanUs);
  EXPECT_GT(b.step[BreakdownPart::Kernel], 0);
  // The executor's intervals cover the run: nothing is left to "other".
  EXPECT_EQ(b.step[BreakdownPart::Other], 0);
  ASSERT_EQ(b.devices.size(), 5u);
  for (const auto &[device, parts] : b.devices) {
    EXPECT_NEAR(parts.totalUs(), meanUs, 1e-6 * meanUs) << device;
    if (device == "cpu:0")
      continue;
    EXPECT_GT(parts[BreakdownPart::Kernel], 0) << device;
    EXPECT_GT(parts[BreakdownPart::Collective], 0) << device;
    EXPECT_GT(parts[BreakdownPart::CopyHostToDevice], 0) << device << ": x from cpu:0";
    EXPECT_GT(parts.kernelUsByOp.count("Mul"), 0u) << device;
  }
}
