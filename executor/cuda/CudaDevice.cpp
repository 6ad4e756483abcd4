//===- CudaDevice.cpp - A logical GPU device ------------------------------===//
//
// The stream and event discipline of CudaDevice.h. The hazard tracker says
// which points to wait for; this file owns the events behind those points:
// side-stream operations record an event when they are issued (few per
// step), the compute stream gets one on demand (StreamHazards asks only for
// its current position). All of a step's events go back to the pool when the
// step is synchronised.
//
//===----------------------------------------------------------------------===//

#include "executor/cuda/CudaDevice.h"
#include "executor/cuda/StepCounter.h"

#include "ir/DeviceId.h"
#include "ir/Diagnostics.h"
#include "kernels/cuda/CudaBackend.h"
#include "kernels/cuda/CudaCheck.h"

#include "llvm/ADT/StringExtras.h"

#include <cstring>
#include <set>
#include <thread>

namespace graphc {

//===-- Events -------------------------------------------------------------===//

CudaEventPool::~CudaEventPool() {
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(ordinal_);
  for (cudaEvent_t e : free_)
    cudaEventDestroy(e);
  cudaSetDevice(previous);
}

llvm::Expected<cudaEvent_t> CudaEventPool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
  }
  // Events belong to the device current at creation.
  int previous = 0;
  GRAPHC_CUDA_TRY(cudaGetDevice(&previous));
  GRAPHC_CUDA_TRY(cudaSetDevice(ordinal_));
  cudaEvent_t e = nullptr;
  cudaError_t status =
      cudaEventCreateWithFlags(&e, timing_ ? cudaEventDefault : cudaEventDisableTiming);
  cudaSetDevice(previous);
  GRAPHC_CUDA_TRY(status);
  return e;
}

void CudaEventPool::release(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(e);
}

llvm::Error waitForEvents(llvm::ArrayRef<cudaEvent_t> events, std::chrono::milliseconds timeout,
                          const std::function<std::string(size_t)> &what,
                          llvm::ArrayRef<std::function<llvm::Error()>> checks) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto nextCheck = start;
  std::vector<bool> done(events.size(), false);
  for (unsigned round = 0;; ++round) {
    bool all = true;
    for (size_t i = 0; i < events.size(); ++i) {
      if (done[i])
        continue;
      cudaError_t s = cudaEventQuery(events[i]);
      if (s == cudaSuccess) {
        done[i] = true;
      } else if (s == cudaErrorNotReady) {
        all = false;
      } else {
        return withContext(cudaCallError(s, "cudaEventQuery", __FILE__, __LINE__), what(i));
      }
    }
    if (all)
      return llvm::Error::success();
    auto now = Clock::now();
    if (now >= nextCheck) {
      for (const auto &check : checks)
        if (auto e = check())
          return e;
      nextCheck = now + std::chrono::milliseconds(100);
    }
    if (now - start >= timeout) {
      std::vector<std::string> busy;
      for (size_t i = 0; i < events.size(); ++i)
        if (!done[i])
          busy.push_back(what(i));
      return makeError("still running after " + llvm::Twine((int64_t)timeout.count()) +
                       " ms: " + llvm::join(busy, "; "));
    }
    // Spin briefly (steps end within microseconds of the last kernel), then
    // sleep so a long wait costs no core.
    if (round < 2000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

namespace {

/// An event recorded on a device's marker or prefetch stream.
class CudaEvent : public DeviceEvent {
public:
  CudaEvent(cudaEvent_t e, std::shared_ptr<CudaEventPool> pool, std::string what,
            std::chrono::milliseconds timeout)
      : event_(e), pool_(std::move(pool)), what_(std::move(what)), timeout_(timeout) {}
  ~CudaEvent() override {
    if (event_)
      pool_->release(event_);
  }
  llvm::Error synchronize() const override {
    return waitForEvents(event_, timeout_, [&](size_t) { return what_; });
  }
  void *nativeHandle() const override { return event_; }

private:
  cudaEvent_t event_;
  std::shared_ptr<CudaEventPool> pool_;
  std::string what_;
  std::chrono::milliseconds timeout_;
};

std::mutex peerMutex;
std::set<std::pair<int, int>> &peerPairs() {
  static std::set<std::pair<int, int>> pairs;
  return pairs;
}

/// Lets `ordinal` address every GPU it can reach (peer copies and the
/// cross-GPU reduction kernel); once per pair and process.
void enablePeers(int ordinal) {
  std::lock_guard<std::mutex> lock(peerMutex);
  int n = cudaVisibleDeviceCount();
  for (int j = 0; j < n; ++j) {
    if (j == ordinal || peerPairs().count({ordinal, j}))
      continue;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, ordinal, j) != cudaSuccess || !can) {
      cudaGetLastError();
      continue;
    }
    cudaError_t s = cudaDeviceEnablePeerAccess(j, 0);
    if (s == cudaSuccess || s == cudaErrorPeerAccessAlreadyEnabled)
      peerPairs().insert({ordinal, j});
    cudaGetLastError(); // not sticky; keep it out of later calls
  }
}

} // namespace

bool CudaDevice::peerAccess(int from, int to) {
  if (from == to)
    return true;
  std::lock_guard<std::mutex> lock(peerMutex);
  return peerPairs().count({from, to}) > 0;
}

//===-- Visible GPUs --------------------------------------------------------===//

namespace {
struct Probe {
  int count = 0;
  std::string reason;
};
const Probe &probe() {
  static const Probe p = [] {
    Probe r;
    cudaError_t s = cudaGetDeviceCount(&r.count);
    if (s != cudaSuccess) {
      r.count = 0;
      r.reason = std::string(cudaGetErrorName(s)) + ": " + cudaGetErrorString(s);
      cudaGetLastError();
    } else if (r.count == 0) {
      r.reason = "the CUDA driver reports no GPU";
    }
    return r;
  }();
  return p;
}
} // namespace

int cudaVisibleDeviceCount() {
  return probe().count;
}
std::string cudaUnavailableReason() {
  return probe().reason;
}

std::string cudaDeviceDescription(int ordinal) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return "unknown GPU";
  }
  return std::string(prop.name) + ", " + std::to_string(prop.totalGlobalMem >> 30) + " GiB";
}

std::optional<DeviceModel> cudaDeviceModel(int ordinal) {
  cudaDeviceProp prop;
  if (ordinal < 0 || ordinal >= cudaVisibleDeviceCount() ||
      cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return DeviceModel{prop.name, (int64_t)prop.totalGlobalMem};
}

std::string cudaDTypeRefusal(int ordinal, DType dtype) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return cuda::dtypeRefusal(dtype, ordinal, prop.name, {prop.major, prop.minor});
}

llvm::Expected<double> cudaCopyBandwidth(int from, int to, size_t bytes) {
  // -1: the host, in pinned memory (what the executor stages copies through).
  auto allocate = [&](int where, void *&p) -> llvm::Error {
    if (where < 0) {
      GRAPHC_CUDA_TRY(cudaMallocHost(&p, bytes));
    } else {
      GRAPHC_CUDA_TRY(cudaSetDevice(where));
      GRAPHC_CUDA_TRY(cudaMalloc(&p, bytes));
    }
    return llvm::Error::success();
  };
  auto release = [](int where, void *p) {
    if (!p)
      return;
    if (where < 0) {
      cudaFreeHost(p);
    } else {
      cudaSetDevice(where);
      cudaFree(p);
    }
  };
  void *src = nullptr, *dst = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  auto measure = [&]() -> llvm::Expected<double> {
    if (auto e = allocate(from, src))
      return e;
    if (auto e = allocate(to, dst))
      return e;
    const int timing = to >= 0 ? to : from;
    GRAPHC_CUDA_TRY(cudaSetDevice(timing));
    if (from >= 0 && to >= 0 && from != to) {
      int can = 0;
      GRAPHC_CUDA_TRY(cudaDeviceCanAccessPeer(&can, to, from));
      if (can) {
        cudaError_t s = cudaDeviceEnablePeerAccess(from, 0);
        if (s != cudaSuccess && s != cudaErrorPeerAccessAlreadyEnabled)
          GRAPHC_CUDA_TRY(s);
        cudaGetLastError();
      }
    }
    GRAPHC_CUDA_TRY(cudaEventCreate(&start));
    GRAPHC_CUDA_TRY(cudaEventCreate(&stop));
    double best = 0;
    for (int i = 0; i < 6; ++i) { // the first warms the path up
      GRAPHC_CUDA_TRY(cudaEventRecord(start, nullptr));
      if (from >= 0 && to >= 0)
        GRAPHC_CUDA_TRY(cudaMemcpyPeerAsync(dst, to, src, from, bytes, nullptr));
      else
        GRAPHC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, nullptr));
      GRAPHC_CUDA_TRY(cudaEventRecord(stop, nullptr));
      GRAPHC_CUDA_TRY(cudaEventSynchronize(stop));
      float ms = 0;
      GRAPHC_CUDA_TRY(cudaEventElapsedTime(&ms, start, stop));
      if (i > 0 && ms > 0)
        best = std::max(best, bytes / (ms * 1e-3));
    }
    return best;
  };
  auto r = measure();
  if (start)
    cudaEventDestroy(start);
  if (stop)
    cudaEventDestroy(stop);
  release(from, src);
  release(to, dst);
  return r;
}

//===-- Creation ------------------------------------------------------------===//

llvm::Expected<std::unique_ptr<CudaDevice>> CudaDevice::create(const DeviceRequest &req) {
  const std::string name = req.id.str();
  if (!req.id.isGpu())
    return makeError("'" + name + "' is not a GPU device (gpu:N)");
  int count = cudaVisibleDeviceCount();
  int ordinal = req.physicalOrdinal >= 0 ? req.physicalOrdinal : (int)req.id.index;
  if (ordinal >= count)
    return makeError("device '" + name + "' needs physical GPU " + llvm::Twine(ordinal) +
                     ", but this machine has " + llvm::Twine(count) + " GPU" +
                     (count == 1 ? "" : "s") +
                     "; map the plan's GPUs onto fewer physical ones (--emulate)");
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  d->name_ = name;
  d->ordinal_ = ordinal;
  d->timeout_ = req.waitTimeout;
  GRAPHC_CUDA_TRY(cudaSetDevice(ordinal));
  cudaDeviceProp prop;
  GRAPHC_CUDA_TRY(cudaGetDeviceProperties(&prop, ordinal));
  d->gpuName_ = prop.name;
  d->totalMemory_ = prop.totalGlobalMem;
  // cuDNN and cuBLAS are opened here, the first time a GPU device is created.
  auto backend = CudaBackend::create(ordinal);
  if (!backend)
    return withContext(backend.takeError(), "creating device " + name);
  d->backend_ = std::move(*backend);
  // Copies and collectives get the higher priority, so that communication
  // is not queued behind a long run of compute kernels.
  int leastPriority = 0, greatestPriority = 0;
  GRAPHC_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&leastPriority, &greatestPriority));
  for (unsigned s = 0; s < kCudaStreams; ++s) {
    int priority = (CudaStream)s == CudaStream::Compute ? leastPriority : greatestPriority;
    GRAPHC_CUDA_TRY(cudaStreamCreateWithPriority(&d->streams_[s], cudaStreamNonBlocking, priority));
  }
  d->pool_ = std::make_shared<CudaEventPool>(ordinal, false);
  d->timingPool_ = std::make_shared<CudaEventPool>(ordinal, true);
  enablePeers(ordinal);
  auto counter = d->allocate(sizeof(DeviceStep));
  if (!counter)
    return withContext(counter.takeError(), "the step counter of " + name);
  d->stepCounter_ = static_cast<DeviceStep *>(*counter);
  return d;
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal_);
  for (cudaStream_t s : streams_)
    if (s)
      cudaStreamSynchronize(s);
  forgetStep();
  for (auto &[p, bytes] : allocations_)
    cudaFree(p);
  for (cudaStream_t s : streams_)
    if (s)
      cudaStreamDestroy(s);
}

std::string CudaDevice::describe() const {
  return gpuName_ + ", physical GPU " + std::to_string(ordinal_);
}

llvm::Error CudaDevice::makeCurrent() const {
  int current = -1;
  GRAPHC_CUDA_TRY(cudaGetDevice(&current));
  if (current != ordinal_)
    GRAPHC_CUDA_TRY(cudaSetDevice(ordinal_));
  return llvm::Error::success();
}

KernelEnv CudaDevice::kernelEnv() {
  // Kernels are created (and prepared) right after this call, on this
  // thread; whatever they set up belongs on this device's GPU.
  if (llvm::Error e = makeCurrent())
    llvm::consumeError(std::move(e));
  KernelEnv env;
  env.kind = DeviceKind::GPU;
  env.threads = 1;
  env.backend = backend_.get();
  return env;
}

//===-- Memory ---------------------------------------------------------------===//

llvm::Expected<void *> CudaDevice::allocate(size_t bytes) {
  if (auto e = makeCurrent())
    return e;
  size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  void *p = nullptr;
  cudaError_t s = cudaMalloc(&p, rounded);
  if (s == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t freeBytes = 0, totalBytes = 0;
    cudaMemGetInfo(&freeBytes, &totalBytes);
    std::lock_guard<std::mutex> lock(memoryMutex_);
    return makeError(name_ + " (" + gpuName_ + ", physical GPU " + llvm::Twine(ordinal_) +
                     "): out of memory allocating " + llvm::Twine((uint64_t)bytes) +
                     " bytes; the GPU has " + llvm::Twine((uint64_t)freeBytes) + " bytes free of " +
                     llvm::Twine((uint64_t)totalBytes) + ", this device holds " +
                     llvm::Twine((uint64_t)allocatedBytes_));
  }
  GRAPHC_CUDA_TRY(s);
  cudaStream_t st = stream(CudaStream::CopyOut);
  GRAPHC_CUDA_TRY(cudaMemsetAsync(p, 0, rounded, st));
  GRAPHC_CUDA_TRY(cudaStreamSynchronize(st));
  std::lock_guard<std::mutex> lock(memoryMutex_);
  allocations_[p] = rounded;
  allocatedBytes_ += rounded;
  return p;
}

void CudaDevice::deallocate(void *p) {
  if (!p)
    return;
  std::lock_guard<std::mutex> lock(memoryMutex_);
  auto it = allocations_.find(p);
  if (it == allocations_.end())
    return;
  cudaSetDevice(ordinal_);
  cudaFree(p);
  allocatedBytes_ -= it->second;
  allocations_.erase(it);
}

llvm::Error CudaDevice::copyIn(void *dst, const void *host, size_t bytes) {
  if (capturing_)
    return makeError(name_ + ": a blocking copy cannot be part of a captured CUDA graph");
  std::lock_guard<std::mutex> lock(bounceMutex_);
  if (auto e = makeCurrent())
    return e;
  return bounce_.toDevice(dst, host, bytes, stream(CudaStream::CopyOut));
}

llvm::Error CudaDevice::copyOut(void *host, const void *src, size_t bytes) {
  if (capturing_)
    return makeError(name_ + ": a blocking copy cannot be part of a captured CUDA graph");
  std::lock_guard<std::mutex> lock(bounceMutex_);
  if (auto e = makeCurrent())
    return e;
  return bounce_.toHost(host, src, bytes, stream(CudaStream::CopyOut));
}

llvm::Error CudaDevice::readToHost(void *host, const void *src, size_t bytes) {
  return copyOut(host, src, bytes);
}

llvm::Expected<std::shared_ptr<DeviceEvent>> CudaDevice::copyInAsync(void *dst, const void *host,
                                                                     size_t bytes) {
  std::lock_guard<std::mutex> lock(prefetchMutex_);
  if (auto e = makeCurrent())
    return e;
  cudaStream_t st = stream(CudaStream::Prefetch);
  if (bytes) {
    auto pinned = prefetchSlots_.acquire(dst, bytes);
    if (!pinned)
      return pinned.takeError();
    std::memcpy(*pinned, host, bytes);
    GRAPHC_CUDA_TRY(cudaMemcpyAsync(dst, *pinned, bytes, cudaMemcpyHostToDevice, st));
    if (auto e = prefetchSlots_.release(dst, st))
      return e;
  }
  auto ev = pool_->acquire();
  if (!ev)
    return ev.takeError();
  GRAPHC_CUDA_TRY(cudaEventRecord(*ev, st));
  return std::make_shared<CudaEvent>(*ev, pool_, name_ + " stream prefetch", timeout_);
}

//===-- Issuing -------------------------------------------------------------===//

llvm::Expected<cudaEvent_t> CudaDevice::eventAt(StreamPoint p) {
  if (p.stream == (unsigned)CudaStream::Compute) {
    // The tracker only ever asks for compute's current position.
    if (!computeMark_ || computeMarkTicket_ != p.ticket) {
      auto e = pool_->acquire();
      if (!e)
        return e.takeError();
      GRAPHC_CUDA_TRY(cudaEventRecord(*e, stream(CudaStream::Compute)));
      stepEvents_.push_back(*e);
      computeMark_ = *e;
      computeMarkTicket_ = p.ticket;
    }
    return computeMark_;
  }
  std::vector<cudaEvent_t> &events = sideEvents_[p.stream];
  if (p.ticket >= 1 && p.ticket <= events.size() && events[p.ticket - 1])
    return events[p.ticket - 1];
  // An operation that failed before its end was recorded: its stream's
  // current position covers it.
  auto e = pool_->acquire();
  if (!e)
    return e.takeError();
  GRAPHC_CUDA_TRY(cudaEventRecord(*e, stream((CudaStream)p.stream)));
  stepEvents_.push_back(*e);
  return *e;
}

llvm::Error CudaDevice::applyWaits(cudaStream_t st, llvm::ArrayRef<StreamPoint> points) {
  for (const StreamPoint &p : points) {
    auto e = eventAt(p);
    if (!e)
      return e.takeError();
    GRAPHC_CUDA_TRY(cudaStreamWaitEvent(st, *e, 0));
  }
  return llvm::Error::success();
}

llvm::Error CudaDevice::anchorClock() {
  if (!clock_ || capturing_ || base_)
    return llvm::Error::success();
  // The GPU is idle at a step's first operation (the last step ended with
  // synchronize), and nothing waits on compute yet, so this event completes
  // about when it is recorded.
  auto b = timingPool_->acquire();
  if (!b)
    return b.takeError();
  GRAPHC_CUDA_TRY(cudaEventRecord(*b, stream(CudaStream::Compute)));
  baseHostUs_ = clock_->nowUs();
  base_ = *b;
  return llvm::Error::success();
}

llvm::Error CudaDevice::startTiming(cudaStream_t st, bool waited) {
  pendingStart_ = nullptr;
  if (!clock_ || capturing_)
    return llvm::Error::success();
  auto s = timingPool_->acquire();
  if (!s)
    return s.takeError();
  GRAPHC_CUDA_TRY(cudaEventRecord(*s, st));
  pendingStart_ = *s;
  pendingIssuedUs_ = clock_->nowUs();
  pendingWaited_ = waited;
  return llvm::Error::success();
}

llvm::Expected<cudaStream_t> CudaDevice::beginOperation(CudaStream s,
                                                        llvm::ArrayRef<ByteRange> reads,
                                                        llvm::ArrayRef<ByteRange> writes,
                                                        llvm::StringRef label) {
  assert((unsigned)s < kTrackedCudaStreams && "only tracked streams carry step work");
  if (auto e = makeCurrent())
    return e;
  if (auto e = anchorClock())
    return e;
  cudaStream_t st = stream(s);
  bool waited = !pendingWaits_.empty();
  for (cudaEvent_t e : pendingWaits_)
    GRAPHC_CUDA_TRY(cudaStreamWaitEvent(st, e, 0));
  pendingWaits_.clear();
  StreamHazards::Issue plan = hazards_.issue((unsigned)s, reads, writes);
  waited = waited || !plan.waits.empty();
  if (auto e = applyWaits(st, plan.waits))
    return e;
  if (!label.empty())
    lastLabel_[(unsigned)s] = label.str();
  if (auto e = startTiming(st, waited))
    return e;
  return st;
}

llvm::Error CudaDevice::endOperation(CudaStream s) {
  cudaStream_t st = stream(s);
  if (s != CudaStream::Compute) {
    auto e = pool_->acquire();
    if (!e)
      return e.takeError();
    GRAPHC_CUDA_TRY(cudaEventRecord(*e, st));
    stepEvents_.push_back(*e);
    std::vector<cudaEvent_t> &events = sideEvents_[(unsigned)s];
    // Keep ticket - 1 == index even after a failed operation left a gap.
    events.resize(hazards_.issued((unsigned)s) - 1, nullptr);
    events.push_back(*e);
  }
  if (pendingStart_) {
    auto end = timingPool_->acquire();
    if (!end)
      return end.takeError();
    GRAPHC_CUDA_TRY(cudaEventRecord(*end, st));
    timed_.push_back({node_, kind_, cudaTraceStreamIndex(s), pendingStart_, *end, route_,
                      pendingIssuedUs_, pendingWaited_});
    pendingStart_ = nullptr;
  }
  route_ = CopyRoute::DeviceToDevice;
  return llvm::Error::success();
}

llvm::Error CudaDevice::launch(Kernel &k, KernelContext &ctx) {
  llvm::SmallVector<ByteRange, 8> reads, writes;
  for (const TensorView &v : ctx.inputs)
    reads.push_back(ByteRange::of(v.data, v.bytes()));
  for (const TensorView &v : ctx.outputs)
    writes.push_back(ByteRange::of(v.data, v.bytes()));
  auto st = beginOperation(CudaStream::Compute, reads, writes);
  if (!st)
    return st.takeError();
  ctx.stream = *st;
  ctx.deviceStep = stepCounter_;
  if (auto e = k.run(ctx))
    return withContext(std::move(e), "on " + name_);
  return endOperation(CudaStream::Compute);
}

llvm::Error CudaDevice::receive(void *dst, Device &from, const void *src, size_t bytes) {
  if (!bytes)
    return llvm::Error::success();
  if (from.kind() != DeviceKind::GPU) {
    // Host bytes: stage them in page-locked memory so the copy is
    // asynchronous (the staging slot belongs to this destination).
    if (capturing_)
      return makeError(name_ + ": a copy from host device " + from.name() +
                       " cannot be part of a captured CUDA graph");
    std::lock_guard<std::mutex> lock(slotsMutex_);
    if (auto e = makeCurrent())
      return e;
    auto pinned = slots_.acquire(dst, bytes);
    if (!pinned)
      return pinned.takeError();
    std::memcpy(*pinned, src, bytes);
    ByteRange w = ByteRange::of(dst, bytes);
    route_ = CopyRoute::HostToDevice;
    auto st = beginOperation(streamForReceive(CopySource::Host), {}, w, "copy from " + from.name());
    if (!st)
      return st.takeError();
    GRAPHC_CUDA_TRY(cudaMemcpyAsync(dst, *pinned, bytes, cudaMemcpyHostToDevice, *st));
    if (auto e = slots_.release(dst, *st))
      return e;
    return endOperation(streamForReceive(CopySource::Host));
  }
  auto *other = dynamic_cast<CudaDevice *>(&from);
  if (!other)
    return makeError(name_ + ": cannot copy from device " + from.name() +
                     ", which is not a CUDA device of this process");
  CopySource source = other == this                 ? CopySource::SameDevice
                      : other->ordinal_ == ordinal_ ? CopySource::SamePhysicalGpu
                                                    : CopySource::OtherGpu;
  CudaStream s = streamForReceive(source);
  ByteRange w = ByteRange::of(dst, bytes);
  llvm::SmallVector<ByteRange, 1> reads;
  if (source == CopySource::SameDevice)
    reads.push_back(ByteRange::of(src, bytes));
  auto st = beginOperation(s, reads, w, "copy from " + from.name());
  if (!st)
    return st.takeError();
  if (source == CopySource::OtherGpu)
    GRAPHC_CUDA_TRY(cudaMemcpyPeerAsync(dst, ordinal_, src, other->ordinal_, bytes, *st));
  else
    GRAPHC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, *st));
  return endOperation(s);
}

std::shared_ptr<DeviceEvent> CudaDevice::record() {
  // Errors here would leave the waiter without an event; the marker stream
  // only waits and records, so the calls fail only with a broken context,
  // which the next operation or synchronize reports.
  if (llvm::Error e = makeCurrent())
    llvm::consumeError(std::move(e));
  cudaStream_t marker = stream(CudaStream::Marker);
  llvm::SmallVector<StreamPoint, 4> waits = hazards_.join((unsigned)CudaStream::Marker);
  if (llvm::Error e = applyWaits(marker, waits))
    llvm::consumeError(std::move(e));
  cudaEvent_t ev = nullptr;
  if (auto e = pool_->acquire())
    ev = *e;
  else
    llvm::consumeError(e.takeError());
  if (ev)
    cudaEventRecord(ev, marker);
  return std::make_shared<CudaEvent>(ev, pool_, name_ + " (an event other devices wait for)",
                                     timeout_);
}

llvm::Error CudaDevice::wait(const DeviceEvent &e) {
  if (void *native = e.nativeHandle()) {
    pendingWaits_.push_back(static_cast<cudaEvent_t>(native));
    return llvm::Error::success();
  }
  return e.synchronize();
}

//===-- End of a step ----------------------------------------------------===//

void CudaDevice::forgetStep() {
  for (cudaEvent_t e : stepEvents_)
    pool_->release(e);
  stepEvents_.clear();
  for (auto &v : sideEvents_)
    v.clear();
  computeMark_ = nullptr;
  computeMarkTicket_ = 0;
  hazards_.reset();
  for (auto &l : lastLabel_)
    l.clear();
  route_ = CopyRoute::DeviceToDevice;
}

llvm::Error CudaDevice::finishTimings() {
  if (timed_.empty() && !base_)
    return llvm::Error::success();
  for (const Timed &t : timed_) {
    float fromBase = 0, duration = 0;
    GRAPHC_CUDA_TRY(cudaEventElapsedTime(&fromBase, base_, t.start));
    GRAPHC_CUDA_TRY(cudaEventElapsedTime(&duration, t.start, t.end));
    LaunchTiming lt{t.node, t.kind, baseHostUs_ + fromBase * 1000.0, duration * 1000.0};
    lt.stream = t.stream;
    lt.route = t.route;
    lt.issuedUs = t.issuedUs;
    lt.waited = t.waited;
    timings_.push_back(lt);
    timingPool_->release(t.start);
    timingPool_->release(t.end);
  }
  timed_.clear();
  timingPool_->release(base_);
  base_ = nullptr;
  return llvm::Error::success();
}

llvm::Error CudaDevice::synchronize() {
  if (auto e = makeCurrent())
    return e;
  if (capturing_) {
    // No host waits inside a capture: join every stream into the marker, so
    // the capture's origin can join the marker.
    cudaStream_t marker = stream(CudaStream::Marker);
    for (cudaEvent_t e : pendingWaits_)
      GRAPHC_CUDA_TRY(cudaStreamWaitEvent(marker, e, 0));
    pendingWaits_.clear();
    for (unsigned s = 0; s < kTrackedCudaStreams; ++s) {
      if ((CudaStream)s == CudaStream::Marker)
        continue;
      auto e = pool_->acquire();
      if (!e)
        return e.takeError();
      stepEvents_.push_back(*e);
      GRAPHC_CUDA_TRY(cudaEventRecord(*e, stream((CudaStream)s)));
      GRAPHC_CUDA_TRY(cudaStreamWaitEvent(marker, *e, 0));
    }
    auto end = pool_->acquire();
    if (!end)
      return end.takeError();
    stepEvents_.push_back(*end);
    GRAPHC_CUDA_TRY(cudaEventRecord(*end, marker));
    captureEnd_ = *end;
    return llvm::Error::success();
  }
  // Waits for other devices that no operation consumed still order this
  // device's step end after them.
  for (cudaEvent_t e : pendingWaits_)
    GRAPHC_CUDA_TRY(cudaStreamWaitEvent(stream(CudaStream::Compute), e, 0));
  pendingWaits_.clear();
  std::vector<cudaEvent_t> ends;
  for (unsigned s = 0; s < kTrackedCudaStreams; ++s) {
    auto e = pool_->acquire();
    if (!e)
      return e.takeError();
    stepEvents_.push_back(*e);
    GRAPHC_CUDA_TRY(cudaEventRecord(*e, stream((CudaStream)s)));
    ends.push_back(*e);
  }
  auto what = [&](size_t i) {
    std::string s = name_ + " stream " + cudaStreamName((CudaStream)i).str();
    if (!lastLabel_[i].empty())
      s += " (last issued: " + lastLabel_[i] + ")";
    return s;
  };
  if (auto e = waitForEvents(ends, timeout_, what, checks_))
    return e;
  if (auto e = finishTimings())
    return e;
  forgetStep();
  return backend_->takeDeviceError();
}

llvm::Error CudaDevice::beginStep(uint64_t step, uint64_t microStep) {
  // Never inside a capture: the graph would hold the step fixed.
  if (capturing_)
    return makeError(name_ + ": the step counter is set before a capture begins");
  std::optional<DeviceStep> set = counterSync_.before(DeviceStep{step, microStep});
  if (!set)
    return llvm::Error::success();
  if (auto e = makeCurrent())
    return e;
  GRAPHC_CUDA_TRY(launchSetStep(stepCounter_, *set, stream(CudaStream::Compute)));
  return llvm::Error::success();
}

llvm::Error CudaDevice::endStep() {
  if (auto e = makeCurrent())
    return e;
  // After every kernel of the step on compute, the only stream that reads it.
  GRAPHC_CUDA_TRY(launchAdvanceStep(stepCounter_, stream(CudaStream::Compute)));
  if (!capturing_)
    counterSync_.advanced(); // a captured advance runs at each replay
  return llvm::Error::success();
}

llvm::Error CudaDevice::beginCapture(cudaEvent_t start) {
  if (auto e = makeCurrent())
    return e;
  if (!pendingWaits_.empty())
    return makeError(name_ + ": cannot start a capture with cross-device waits pending");
  forgetStep();
  for (unsigned s = 0; s < kTrackedCudaStreams; ++s)
    GRAPHC_CUDA_TRY(cudaStreamWaitEvent(stream((CudaStream)s), start, 0));
  capturing_ = true;
  captureEnd_ = nullptr;
  return llvm::Error::success();
}

void CudaDevice::endCapture() {
  capturing_ = false;
  captureEnd_ = nullptr;
  pendingWaits_.clear();
  forgetStep();
}

llvm::Error CudaDevice::afterGraphStep() {
  // The graph waited for everything issued before it and has completed,
  // its last kernel on this device's compute stream the counter's advance.
  pendingWaits_.clear();
  forgetStep();
  counterSync_.advanced();
  return backend_->takeDeviceError();
}

//===-- Profiling -------------------------------------------------------------===//

void CudaDevice::setProfiling(bool on, TraceRecorder *clock) {
  clock_ = on ? clock : nullptr;
}

void CudaDevice::noteNode(unsigned node, EventKind kind) {
  node_ = node;
  kind_ = kind;
}

std::vector<LaunchTiming> CudaDevice::takeTimings() {
  return std::move(timings_);
}

} // namespace graphc
