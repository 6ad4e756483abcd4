//===- CudaDevice.h - A logical GPU device -----------------------*- C++ -*-===//
//
// One CudaDevice per logical device "gpu:K"; several may share one physical
// GPU (DeviceRequest::physicalOrdinal), each with its own streams, memory and
// cuDNN/cuBLAS handles (CudaBackend), like separate processes would.
//
// Ordering within a step never blocks the host, except where a host device
// reads GPU data (readToHost, DeviceEvent::synchronize) and at the end of the
// step (synchronize):
//   - every operation goes through StreamHazards, which says which points of
//     the device's other streams it waits for (CudaStreams.h: kernels on
//     compute, incoming copies on copy-in, collectives on collective);
//   - record() marks everything issued so far with one event on the marker
//     stream, which waits for the other streams (compute does not);
//   - wait(event of another GPU device) is a stream wait, applied to the
//     stream of the next operation (or to compute at synchronize).
// Memory comes from cudaMalloc, zero-filled; out of memory is an error naming
// the device, the bytes asked and the GPU's free and total memory. Host
// copies go through page-locked staging (PinnedStaging.h).
//
// Profiling: CUDA events around each operation, turned into LaunchTimings on
// the trace clock at synchronize (an event recorded when the step's first
// timed operation is issued, on an idle GPU, anchors the GPU clock to the
// host's). Each also carries when the host issued it and whether it was made
// to wait for another stream or device, from which the step breakdown finds
// the streams' waits (StepBreakdown.h).
//
// Capture (CudaStepGraph): while capturing, synchronize() joins the streams
// instead of waiting, and anything that would block the host is an error.
// The step counter kernels read lives in device memory and is advanced by
// the step itself (StepCounterSync.h), so a replayed graph sees every step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Device.h"
#include "executor/cuda/CudaStreams.h"
#include "executor/cuda/PinnedStaging.h"
#include "executor/cuda/StepCounterSync.h"
#include "executor/cuda/StreamHazards.h"
#include "ir/DType.h"

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <mutex>
#include <optional>

namespace graphc {

class CudaBackend;

/// Events of one physical GPU, reused. Thread-safe.
class CudaEventPool {
public:
  CudaEventPool(int ordinal, bool timing) : ordinal_(ordinal), timing_(timing) {}
  ~CudaEventPool();
  llvm::Expected<cudaEvent_t> acquire();
  void release(cudaEvent_t e);

private:
  int ordinal_;
  bool timing_;
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

/// Waits on the host until every event completed, polling, for at most
/// `timeout`. `checks` run while waiting (NCCL's asynchronous errors) and
/// end the wait with their error. `what(i)` names event i for messages.
llvm::Error waitForEvents(llvm::ArrayRef<cudaEvent_t> events, std::chrono::milliseconds timeout,
                          const std::function<std::string(size_t)> &what,
                          llvm::ArrayRef<std::function<llvm::Error()>> checks = {});

class CudaDevice : public Device {
public:
  static llvm::Expected<std::unique_ptr<CudaDevice>> create(const DeviceRequest &req);
  ~CudaDevice() override;

  const std::string &name() const override { return name_; }
  DeviceKind kind() const override { return DeviceKind::GPU; }
  std::string describe() const override;
  std::vector<std::string> traceStreams() const override { return cudaTraceStreams(); }

  llvm::Expected<void *> allocate(size_t bytes) override;
  void deallocate(void *p) override;
  llvm::Error copyIn(void *dst, const void *host, size_t bytes) override;
  llvm::Error copyOut(void *host, const void *src, size_t bytes) override;
  llvm::Expected<std::shared_ptr<DeviceEvent>> copyInAsync(void *dst, const void *host,
                                                           size_t bytes) override;

  KernelEnv kernelEnv() override;
  llvm::Error launch(Kernel &k, KernelContext &ctx) override;
  llvm::Error receive(void *dst, Device &from, const void *src, size_t bytes) override;
  llvm::Error readToHost(void *host, const void *src, size_t bytes) override;

  std::shared_ptr<DeviceEvent> record() override;
  llvm::Error wait(const DeviceEvent &e) override;
  llvm::Error synchronize() override;
  llvm::Error beginStep(uint64_t step, uint64_t microStep) override;
  llvm::Error endStep() override;

  void setProfiling(bool on, TraceRecorder *clock) override;
  void noteNode(unsigned node, EventKind kind) override;
  std::vector<LaunchTiming> takeTimings() override;

  //===-- For the collective engine and step capture (executor/cuda) ------===//

  int ordinal() const { return ordinal_; }
  CudaBackend &backend() { return *backend_; }
  std::chrono::milliseconds waitTimeout() const { return timeout_; }
  /// Selects this device's GPU on the calling thread.
  llvm::Error makeCurrent() const;
  cudaStream_t stream(CudaStream s) const { return streams_[(unsigned)s]; }
  CudaEventPool &events() { return *pool_; }

  /// Issues an operation on a tracked stream: applies pending cross-device
  /// waits and the hazard waits, starts its timing; returns the stream.
  /// `label` names it in stall messages.
  llvm::Expected<cudaStream_t> beginOperation(CudaStream s, llvm::ArrayRef<ByteRange> reads,
                                              llvm::ArrayRef<ByteRange> writes,
                                              llvm::StringRef label = {});
  /// Marks the end of the operation just issued on `s`.
  llvm::Error endOperation(CudaStream s);
  /// While waiting at synchronize: checks that may end the wait with an error.
  void addWaitCheck(std::function<llvm::Error()> check) { checks_.push_back(std::move(check)); }

  /// Capture: every stream of this device waits for `start` (recorded on the
  /// capturing origin stream), and synchronize() joins instead of waiting.
  llvm::Error beginCapture(cudaEvent_t start);
  /// The event synchronize() recorded on the marker stream while capturing:
  /// everything the device issued in the captured step.
  cudaEvent_t captureEnd() const { return captureEnd_; }
  /// Back to eager issue; forgets the step's bookkeeping.
  void endCapture();
  bool capturing() const { return capturing_; }
  /// After a replayed (or captured and launched) step completed: per-step
  /// checks (the kernels' device error word); the graph advanced the step
  /// counter.
  llvm::Error afterGraphStep();

  /// Whether device `from` can address device `to`'s memory directly
  /// (enabled when both devices were created).
  static bool peerAccess(int from, int to);

private:
  CudaDevice() = default;
  llvm::Expected<cudaEvent_t> eventAt(StreamPoint p);
  llvm::Error applyWaits(cudaStream_t st, llvm::ArrayRef<StreamPoint> points);
  /// The step's first timed operation records the base event, on the idle
  /// compute stream before any wait is applied to it.
  llvm::Error anchorClock();
  llvm::Error startTiming(cudaStream_t st, bool waited);
  llvm::Error finishTimings();
  void forgetStep();

  std::string name_, gpuName_;
  int ordinal_ = 0;
  size_t totalMemory_ = 0;
  std::chrono::milliseconds timeout_{std::chrono::minutes(5)};
  std::unique_ptr<CudaBackend> backend_;
  std::array<cudaStream_t, kCudaStreams> streams_{};
  std::shared_ptr<CudaEventPool> pool_, timingPool_;

  // Step bookkeeping (the issuing thread only).
  StreamHazards hazards_{kTrackedCudaStreams};
  std::array<std::vector<cudaEvent_t>, kTrackedCudaStreams> sideEvents_; ///< by ticket - 1
  cudaEvent_t computeMark_ = nullptr;
  uint64_t computeMarkTicket_ = 0;
  std::vector<cudaEvent_t> stepEvents_; ///< returned to the pool at synchronize
  std::vector<cudaEvent_t> pendingWaits_;
  std::array<std::string, kTrackedCudaStreams> lastLabel_;
  std::vector<std::function<llvm::Error()>> checks_;
  bool capturing_ = false;
  cudaEvent_t captureEnd_ = nullptr;
  /// The step counter kernels read (KernelContext::deviceStep), and what the
  /// host knows of it (StepCounterSync.h).
  DeviceStep *stepCounter_ = nullptr;
  StepCounterSync counterSync_;

  // Profiling.
  TraceRecorder *clock_ = nullptr;
  unsigned node_ = 0;
  EventKind kind_ = EventKind::Compute;
  /// receive() sets where its copy goes; endOperation resets it.
  CopyRoute route_ = CopyRoute::DeviceToDevice;
  struct Timed {
    unsigned node;
    EventKind kind;
    int stream;
    cudaEvent_t start, end;
    CopyRoute route;
    double issuedUs; ///< host clock when its start event was recorded
    bool waited;     ///< made to wait for another stream's or device's event
  };
  std::vector<Timed> timed_;
  cudaEvent_t base_ = nullptr;
  double baseHostUs_ = 0;
  cudaEvent_t pendingStart_ = nullptr;
  double pendingIssuedUs_ = 0;
  bool pendingWaited_ = false;
  std::vector<LaunchTiming> timings_;

  // Host staging, each under its own lock (several threads use them).
  std::mutex slotsMutex_, prefetchMutex_, bounceMutex_, memoryMutex_;
  PinnedSlots slots_, prefetchSlots_;
  PinnedBounce bounce_;
  llvm::DenseMap<void *, size_t> allocations_;
  size_t allocatedBytes_ = 0;
};

/// cudaGetDeviceCount, or 0 without a driver or GPU (cached).
int cudaVisibleDeviceCount();
/// Why no GPU is usable ("CUDA driver version is insufficient ..."), or "".
std::string cudaUnavailableReason();
/// "NVIDIA H100 80GB HBM3, 79 GiB".
std::string cudaDeviceDescription(int ordinal);
/// Physical GPU `ordinal`'s name and memory, or none where it cannot be asked.
std::optional<DeviceModel> cudaDeviceModel(int ordinal);
/// Why physical GPU `ordinal` cannot compute in `dtype` (kernels/cuda/
/// ComputeCapability.h), or "" where it can or cannot be asked.
std::string cudaDTypeRefusal(int ordinal, DType dtype);
/// Bytes per second of a `bytes` copy from physical GPU `from` to `to`
/// (-1: pinned host memory), the best of five after a warm-up, timed with
/// CUDA events; between two GPUs a peer copy.
llvm::Expected<double> cudaCopyBandwidth(int from, int to, size_t bytes);

} // namespace graphc
