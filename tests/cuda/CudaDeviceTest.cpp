//===- CudaDeviceTest.cpp - One logical GPU device ------------------------===//
//
// Memory, blocking and in-step copies, events between devices, timings and
// the synchronize timeout of CudaDevice. Skipped ("no CUDA device") where no
// GPU is usable.
//
//===----------------------------------------------------------------------===//

#include "CudaTestSupport.h"

#include "executor/DeviceRegistry.h"
#include "kernels/cuda/CudaCheck.h"

#include <cstring>
#include <numeric>
#include <thread>

using namespace graphc;

namespace {
std::vector<float> pattern(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = base + (float)(i % 1000) * 0.5f;
  return v;
}
} // namespace

TEST(CudaDevice, MemoryIsZeroedAndBlockingCopiesRoundTrip) {
  GRAPHC_REQUIRE_GPUS(1);
  auto d = makeGpu(0);
  ASSERT_TRUE(d);
  EXPECT_NE(d->describe().find("physical GPU 0"), std::string::npos) << d->describe();
  // Larger than the staging chunk (8 MiB), not a multiple of it.
  const size_t n = (size_t(20) << 20) / 4 + 3;
  auto p = d->allocate(n * 4);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  std::vector<float> back(n, 1.f);
  ASSERT_FALSE(d->copyOut(back.data(), *p, n * 4));
  EXPECT_EQ(std::count(back.begin(), back.end(), 0.f), (long)n) << "allocate zero-fills";
  std::vector<float> data = pattern(n, 3);
  ASSERT_FALSE(d->copyIn(*p, data.data(), n * 4));
  ASSERT_FALSE(d->copyOut(back.data(), *p, n * 4));
  EXPECT_EQ(std::memcmp(back.data(), data.data(), n * 4), 0);
  d->deallocate(*p);
}

TEST(CudaDevice, CopyBandwidthIsTimedBothWaysAndRefusesAMissingGpu) {
  GRAPHC_REQUIRE_GPUS(1);
  // graphrun calibrate's link figures: PCIe or better, well under HBM.
  for (auto [from, to] : {std::pair{DeviceId::host(), DeviceId::gpu(0)},
                          std::pair{DeviceId::gpu(0), DeviceId::host()}}) {
    auto bw = copyBandwidth(from, to, 16u << 20);
    ASSERT_TRUE(bool(bw)) << llvm::toString(bw.takeError());
    EXPECT_GT(*bw, 1e9) << from.str() << " -> " << to.str();
    EXPECT_LT(*bw, 5e12) << from.str() << " -> " << to.str();
  }
  auto missing =
      copyBandwidth(DeviceId::host(), DeviceId::gpu(visibleDeviceCount(DeviceKind::GPU)), 1 << 20);
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("this machine has"), std::string::npos);
}

TEST(CudaDevice, OutOfMemoryNamesTheDeviceTheBytesAndTheFreeMemory) {
  GRAPHC_REQUIRE_GPUS(1);
  auto d = makeGpu(3, 0);
  ASSERT_TRUE(d);
  auto p = d->allocate(size_t(1) << 50);
  ASSERT_FALSE(bool(p));
  std::string msg = llvm::toString(p.takeError());
  EXPECT_NE(msg.find("gpu:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("physical GPU 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of memory allocating 1125899906842624 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bytes free of"), std::string::npos) << msg;
  // The device still works afterwards.
  auto q = d->allocate(1024);
  ASSERT_TRUE(bool(q)) << llvm::toString(q.takeError());
  d->deallocate(*q);
}

TEST(CudaDevice, APlanGpuBeyondThePhysicalOnesIsRefusedWithAHint) {
  GRAPHC_REQUIRE_GPUS(1);
  DeviceRequest req;
  req.id = DeviceId::gpu((unsigned)cudaVisibleDeviceCount());
  auto d = CudaDevice::create(req);
  ASSERT_FALSE(bool(d));
  std::string msg = llvm::toString(d.takeError());
  EXPECT_NE(msg.find("--emulate"), std::string::npos) << msg;
}

TEST(CudaDevice, ReceivingFromAHostDeviceStagesThroughPinnedMemory) {
  GRAPHC_REQUIRE_GPUS(1);
  auto gpu = makeGpu(0);
  ASSERT_TRUE(gpu);
  DeviceRequest cpuReq;
  cpuReq.id = DeviceId::host();
  auto cpu = createDevice(cpuReq);
  ASSERT_TRUE(bool(cpu));
  const size_t n = 100003;
  auto src = (*cpu)->allocate(n * 4);
  auto dst = gpu->allocate(n * 4);
  ASSERT_TRUE(src && dst);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> data = pattern(n, (float)step);
    std::memcpy(*src, data.data(), n * 4);
    ASSERT_FALSE(gpu->receive(*dst, **cpu, *src, n * 4));
    // The host buffer may change as soon as receive returns (it was staged).
    std::memset(*src, 0, n * 4);
    ASSERT_FALSE(gpu->synchronize());
    std::vector<float> back(n);
    ASSERT_FALSE(gpu->copyOut(back.data(), *dst, n * 4));
    EXPECT_EQ(std::memcmp(back.data(), data.data(), n * 4), 0) << "step " << step;
  }
  // Device to host device: a host device reads through readToHost.
  std::vector<float> data = pattern(n, 7);
  ASSERT_FALSE(gpu->copyIn(*dst, data.data(), n * 4));
  ASSERT_FALSE((*cpu)->receive(*src, *gpu, *dst, n * 4));
  EXPECT_EQ(std::memcmp(*src, data.data(), n * 4), 0);
  (*cpu)->deallocate(*src);
  gpu->deallocate(*dst);
}

TEST(CudaDevice, TwoLogicalDevicesOnOneGpuOrderCopiesWithEvents) {
  GRAPHC_REQUIRE_GPUS(1);
  auto a = makeGpu(0, 0), b = makeGpu(1, 0);
  ASSERT_TRUE(a && b);
  const size_t n = 1 << 20;
  auto pa = a->allocate(n * 4), pb = b->allocate(n * 4), pc = a->allocate(n * 4);
  ASSERT_TRUE(pa && pb && pc);
  std::vector<float> data = pattern(n, 1);
  ASSERT_FALSE(a->copyIn(*pc, data.data(), n * 4));
  for (int step = 0; step < 3; ++step) {
    // a: pc -> pa on its compute stream; b waits for a's event, pulls pa.
    ASSERT_FALSE(a->receive(*pa, *a, *pc, n * 4));
    std::shared_ptr<DeviceEvent> ready = a->record();
    ASSERT_TRUE(ready && ready->nativeHandle());
    ASSERT_FALSE(b->wait(*ready));
    ASSERT_FALSE(b->receive(*pb, *a, *pa, n * 4));
    ASSERT_FALSE(b->synchronize());
    ASSERT_FALSE(a->synchronize());
    std::vector<float> back(n);
    ASSERT_FALSE(b->copyOut(back.data(), *pb, n * 4));
    EXPECT_EQ(std::memcmp(back.data(), data.data(), n * 4), 0) << "step " << step;
  }
  a->deallocate(*pa);
  a->deallocate(*pc);
  b->deallocate(*pb);
}

TEST(CudaDevice, AHostDeviceWaitsOnAGpuEvent) {
  GRAPHC_REQUIRE_GPUS(1);
  auto gpu = makeGpu(0);
  ASSERT_TRUE(gpu);
  auto p = gpu->allocate(64 << 20), q = gpu->allocate(64 << 20);
  ASSERT_TRUE(p && q);
  ASSERT_FALSE(gpu->receive(*q, *gpu, *p, 64 << 20));
  std::shared_ptr<DeviceEvent> e = gpu->record();
  ASSERT_FALSE(e->synchronize());
  EXPECT_EQ(cudaEventQuery(static_cast<cudaEvent_t>(e->nativeHandle())), cudaSuccess);
  ASSERT_FALSE(gpu->synchronize());
  gpu->deallocate(*p);
  gpu->deallocate(*q);
}

TEST(CudaDevice, ProfiledOperationsLandOnTheTraceClockAndTheirStream) {
  GRAPHC_REQUIRE_GPUS(1);
  auto gpu = makeGpu(0);
  ASSERT_TRUE(gpu);
  TraceRecorder clock;
  gpu->setProfiling(true, &clock);
  auto p = gpu->allocate(32 << 20), q = gpu->allocate(32 << 20);
  ASSERT_TRUE(p && q);
  DeviceRequest cpuReq;
  cpuReq.id = DeviceId::host();
  auto cpu = createDevice(cpuReq);
  std::vector<char> host(32 << 20, 1);
  double before = clock.nowUs();
  gpu->noteNode(7, EventKind::Compute);
  ASSERT_FALSE(gpu->receive(*q, *gpu, *p, 32 << 20)); // on compute
  gpu->noteNode(8, EventKind::Copy);
  ASSERT_FALSE(gpu->receive(*p, **cpu, host.data(), 32 << 20)); // on copy-in
  ASSERT_FALSE(gpu->synchronize());
  double after = clock.nowUs();
  std::vector<LaunchTiming> t = gpu->takeTimings();
  ASSERT_EQ(t.size(), 2u);
  std::vector<std::string> tracks = gpu->traceStreams();
  EXPECT_EQ(t[0].node, 7u);
  EXPECT_EQ(tracks[t[0].stream], "compute");
  EXPECT_EQ(t[1].node, 8u);
  EXPECT_EQ(t[1].kind, EventKind::Copy);
  EXPECT_EQ(tracks[t[1].stream], "copy-in");
  // Where the copies went, and which waited: the copy-in writes the bytes
  // the compute copy read, so it waits for compute (the step breakdown's
  // stream waits come from this flag and the issue time).
  EXPECT_EQ(t[0].route, CopyRoute::DeviceToDevice);
  EXPECT_EQ(t[1].route, CopyRoute::HostToDevice);
  EXPECT_FALSE(t[0].waited);
  EXPECT_TRUE(t[1].waited);
  for (const LaunchTiming &x : t) {
    EXPECT_GT(x.durationUs, 0);
    // The GPU clock is anchored within tens of microseconds of the host's.
    EXPECT_GE(x.startUs, before - 100);
    EXPECT_LE(x.startUs + x.durationUs, after + 100);
    // Issued on the host before it ran on the GPU (within that anchoring).
    EXPECT_GE(x.issuedUs, before);
    EXPECT_LE(x.issuedUs, x.startUs + 100);
  }
  EXPECT_TRUE(gpu->takeTimings().empty());
  gpu->deallocate(*p);
  gpu->deallocate(*q);
}

namespace {
void CUDART_CB sleepOnHost(void *ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int *>(ms)));
}
} // namespace

TEST(CudaDevice, SynchronizeGivesUpAfterTheTimeoutNamingTheBusyStream) {
  GRAPHC_REQUIRE_GPUS(1);
  auto gpu = makeGpu(0, 0, std::chrono::milliseconds(100));
  ASSERT_TRUE(gpu);
  static int ms = 800;
  auto st = gpu->beginOperation(CudaStream::Collective, {}, {}, "a stuck collective");
  ASSERT_TRUE(bool(st));
  ASSERT_EQ(cudaLaunchHostFunc(*st, sleepOnHost, &ms), cudaSuccess);
  ASSERT_FALSE(gpu->endOperation(CudaStream::Collective));
  llvm::Error e = gpu->synchronize();
  ASSERT_TRUE(bool(e));
  std::string msg = llvm::toString(std::move(e));
  EXPECT_NE(msg.find("still running after 100 ms"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gpu:0 stream collective (last issued: a stuck collective)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("stream compute"), std::string::npos) << "compute was idle: " << msg;
  // Let it finish before the device goes.
  cudaStreamSynchronize(*st);
  ASSERT_FALSE(gpu->synchronize());
}
