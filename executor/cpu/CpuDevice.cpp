//===- CpuDevice.cpp - Host devices ----------------------------------------===//
//
// A CPU device runs kernels synchronously on the thread that issues them,
// holding its share of the process's cores (CoreBudget) and setting the
// OpenMP team to that share. Its memory is host memory, so other host devices
// read it directly; its events are complete once recorded.
//
// The CPU backend of the device registry: any cpu:N may be created (each a
// share of this machine's cores), copies between them are memcpy, and
// convolutions may compute by oneDNN's or our own Winograd.
//
//===----------------------------------------------------------------------===//

#include "executor/CoreBudget.h"
#include "executor/DeviceRegistry.h"
#include "ir/Diagnostics.h"
#include "ir/MemoryLimit.h"
#include "kernels/cpu/ConvWinograd1d.h"
#include "kernels/cpu/CpuBackend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace graphc {
namespace {

class DoneEvent : public DeviceEvent {
public:
  llvm::Error synchronize() const override { return llvm::Error::success(); }
};

class CpuDevice : public Device {
public:
  CpuDevice(const DeviceRequest &req)
      : name_(req.id.str()), threads_(std::max(1, req.threads)), cores_(req.cores),
        stream_(CpuBackend::instance().engine()), relativeSpeed_(req.relativeSpeed) {}

  const std::string &name() const override { return name_; }
  DeviceKind kind() const override { return DeviceKind::CPU; }
  std::string describe() const override {
    std::string text =
        "cpu, " + std::to_string(threads_) + (threads_ == 1 ? " thread" : " threads");
    if (relativeSpeed_ < 1) {
      char speed[32];
      std::snprintf(speed, sizeof speed, "%g", relativeSpeed_);
      text += std::string(", emulated at relative speed ") + speed;
    }
    return text;
  }

  /// Each block starts with a 64-byte header holding its size, which
  /// deallocate gives back to the process's --memory-limit count.
  llvm::Expected<void *> allocate(size_t bytes) override {
    size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64 + kHeader;
    if (auto e = reserveHostBytes((int64_t)rounded, name_))
      return e;
    auto *p = static_cast<unsigned char *>(std::aligned_alloc(64, rounded));
    if (!p) {
      releaseHostBytes((int64_t)rounded);
      return makeError(name_ + ": out of host memory allocating " + llvm::Twine(bytes) + " bytes");
    }
    std::memset(p, 0, rounded);
    std::memcpy(p, &rounded, sizeof(rounded));
    return p + kHeader;
  }
  void deallocate(void *p) override {
    if (!p)
      return;
    auto *block = static_cast<unsigned char *>(p) - kHeader;
    size_t rounded = 0;
    std::memcpy(&rounded, block, sizeof(rounded));
    releaseHostBytes((int64_t)rounded);
    std::free(block);
  }
  llvm::Error copyIn(void *dst, const void *host, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, host, bytes);
    return llvm::Error::success();
  }
  llvm::Error copyOut(void *host, const void *src, size_t bytes) override {
    return copyIn(host, src, bytes);
  }

  KernelEnv kernelEnv() override {
    KernelEnv env;
    env.kind = DeviceKind::CPU;
    env.threads = threads_;
    env.backend = &CpuBackend::instance();
    return env;
  }

  llvm::Error launch(Kernel &k, KernelContext &ctx) override {
    ctx.stream = &stream_;
    double start;
    {
      // The kernel's time starts once it holds its cores: waiting for another
      // device's kernel to give them back is not this kernel's work, but a
      // wait (the step breakdown's).
      double asked = clock_ ? clock_->nowUs() : 0;
      std::optional<CoreBudget::Lease> lease;
      if (cores_) {
        lease.emplace(*cores_, threads_);
        if (void *scratch = lease->scratch())
          ctx.scratch = scratch; // the executor's shared buffers (CoreBudget.h)
      }
      start = clock_ ? clock_->nowUs() : 0;
      if (clock_ && start - asked > 1)
        timings_.push_back({node_, EventKind::Wait, asked, start - asked});
      setCpuThreads(threads_);
      Clock::time_point ran = Clock::now();
      if (auto e = k.run(ctx))
        return e;
      stream_.wait();
      if (relativeSpeed_ < 1)
        owed_ += (Clock::now() - ran) * (1 / relativeSpeed_ - 1);
    }
    payOwedTime();
    if (clock_)
      timings_.push_back({node_, kind_, start, clock_->nowUs() - start});
    return llvm::Error::success();
  }

  llvm::Error receive(void *dst, Device &from, const void *src, size_t bytes) override {
    double start = clock_ ? clock_->nowUs() : 0;
    const bool fromHost = from.kind() == DeviceKind::CPU;
    if (fromHost) {
      if (bytes && dst != src)
        std::memcpy(dst, src, bytes);
    } else if (auto e = from.readToHost(dst, src, bytes)) {
      return e;
    }
    if (clock_) {
      LaunchTiming t{node_, EventKind::Copy, start, clock_->nowUs() - start};
      t.route = fromHost ? CopyRoute::DeviceToDevice : CopyRoute::DeviceToHost;
      timings_.push_back(t);
    }
    return llvm::Error::success();
  }
  llvm::Error readToHost(void *host, const void *src, size_t bytes) override {
    return copyOut(host, src, bytes);
  }

  std::shared_ptr<DeviceEvent> record() override { return std::make_shared<DoneEvent>(); }
  llvm::Error wait(const DeviceEvent &e) override { return e.synchronize(); }
  llvm::Error synchronize() override { return llvm::Error::success(); }

  void setProfiling(bool on, TraceRecorder *clock) override { clock_ = on ? clock : nullptr; }
  void noteNode(unsigned node, EventKind kind) override {
    node_ = node;
    kind_ = kind;
  }
  std::vector<LaunchTiming> takeTimings() override { return std::move(timings_); }

private:
  using Clock = std::chrono::steady_clock;
  /// A slower device (relativeSpeed_ < 1) owes (1/speed - 1) times each
  /// kernel's run time. It waits that long after the kernel, with its cores
  /// given back: a slower device of its own would not take the other
  /// devices' cores. Short debts add up until they are worth a sleep (the
  /// scheduler's granularity would turn many tiny sleeps into long ones);
  /// a sleep that overshoots is credited to the next.
  void payOwedTime() {
    if (owed_ < kShortestSleep)
      return;
    Clock::time_point before = Clock::now();
    std::this_thread::sleep_for(owed_);
    owed_ -= Clock::now() - before;
  }
  static constexpr std::chrono::microseconds kShortestSleep{200};

  static constexpr size_t kHeader = 64;
  std::string name_;
  int threads_;
  CoreBudget *cores_;
  dnnl::stream stream_;
  TraceRecorder *clock_ = nullptr;
  unsigned node_ = 0;
  EventKind kind_ = EventKind::Compute;
  std::vector<LaunchTiming> timings_;
  double relativeSpeed_;
  std::chrono::duration<double> owed_{0};
};

class CpuDevices : public DeviceBackend {
public:
  DeviceKind kind() const override { return DeviceKind::CPU; }
  int visibleCount() const override { return 1; }
  std::vector<std::string> describeVisible() const override { return {"cpu"}; }
  llvm::Expected<std::unique_ptr<Device>> create(const DeviceRequest &req) const override {
    return std::make_unique<CpuDevice>(req);
  }
  /// A memcpy in this machine's memory, whichever CPU devices are named.
  llvm::Expected<double> copyBandwidth(const DeviceId &, const DeviceId &,
                                       size_t bytes) const override {
    std::vector<char> a(bytes, 1), b(bytes, 0);
    double best = 0;
    for (int i = 0; i < 6; ++i) { // the first touches the pages
      auto t0 = Clock::now();
      std::memcpy(b.data(), a.data(), bytes);
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (i > 0 && s > 0)
        best = std::max(best, bytes / s);
      a[i] = b[bytes - 1 - i]; // keep the copies observable
    }
    return best;
  }
  bool autoConvolutionsMayUseWinograd() const override {
    return cpuHasWinograd() || winograd1dAvailable();
  }

private:
  using Clock = std::chrono::steady_clock;
};

} // namespace

void registerCpuDevices(DeviceRegistry &r) {
  r.add(std::make_unique<CpuDevices>());
}

} // namespace graphc
