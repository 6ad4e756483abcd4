//===- Device.h - What the executor needs from a device ----------*- C++ -*-===//
//
// The executor drives every device through this interface. A device owns its
// memory (arenas, variables), a compute stream on which kernels run in issue
// order, and the means to order its work after other devices' work:
//
//   - launch() runs a kernel (CPU: now, on the calling thread, within the
//     device's share of cores) or enqueues it (CUDA: on the compute stream).
//   - record() marks everything issued so far; another device's wait() makes
//     its later work wait for that mark: an event wait on a stream, never a
//     host synchronisation, where the devices allow it (CUDA after CUDA). A
//     CPU device waiting on a GPU's mark blocks its thread on the event.
//   - receive() copies a tensor produced on another device into this one's
//     memory, within the step (host-to-device on a copy stream, peer copies,
//     device-to-host, or memcpy between host devices).
//   - synchronize() waits for everything issued (the end of a step);
//     beginStep() and endStep() bracket a step's issue, for devices that keep
//     the step counter in their own memory (CUDA, for CUDA graphs).
// Blocking copyIn/copyOut move bytes between host memory and the device
// outside steps (feeds, fetches, variables, checkpoints).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Trace.h"
#include "ir/DeviceId.h"
#include "kernels/Kernel.h"

#include "llvm/Support/Error.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace graphc {

/// What a physical device is: its model as its maker names it ("NVIDIA
/// H200") and its memory.
struct DeviceModel {
  std::string name;
  int64_t memoryBytes = 0;
};

class CoreBudget;

/// A point in a device's issued work.
class DeviceEvent {
public:
  virtual ~DeviceEvent() = default;
  /// Blocks the calling thread until the work before the mark is done.
  virtual llvm::Error synchronize() const = 0;
  /// Set by the CUDA backend: the cudaEvent_t, for stream waits.
  virtual void *nativeHandle() const { return nullptr; }
};

/// One node's time on a device's stream, microseconds on the trace's clock.
/// Kind Wait: the device's thread waited before running the node (a CPU
/// device for the cores another device holds), not the node's own time.
struct LaunchTiming {
  unsigned node;
  EventKind kind;
  double startUs, durationUs;
  /// The trace track: an index into Device::traceStreams(); -1: by kind
  /// (copies on the copy track, everything else on compute).
  int stream = -1;
  /// Copies and inputs: where the bytes went.
  CopyRoute route = CopyRoute::DeviceToDevice;
  /// Devices that queue work (GPUs): when the host issued it, on the trace
  /// clock, and whether it was made to wait for an event of another stream
  /// or device; the step breakdown finds the streams' waits from them
  /// (addStreamWaits). -1: it ran when issued (CPU devices).
  double issuedUs = -1;
  bool waited = false;
};

class Device {
public:
  virtual ~Device() = default;

  virtual const std::string &name() const = 0;
  virtual DeviceKind kind() const = 0;
  /// A short description for run plans ("cpu, 2 threads", "NVIDIA H100, ordinal 0").
  virtual std::string describe() const = 0;

  /// Zero-filled device memory, 64-byte aligned at least.
  virtual llvm::Expected<void *> allocate(size_t bytes) = 0;
  virtual void deallocate(void *p) = 0;
  /// Blocking copies between host memory and this device's memory.
  virtual llvm::Error copyIn(void *dst, const void *host, size_t bytes) = 0;
  virtual llvm::Error copyOut(void *host, const void *src, size_t bytes) = 0;
  /// Starts copying host bytes to `dst`, which no running step uses, and
  /// returns the event that marks the copy's end; `host` may be reused when
  /// the call returns (CUDA: staged through page-locked memory on a copy
  /// stream of its own). Executor::prefetch uses it from a helper thread.
  /// Default: a blocking copyIn and a completed event.
  virtual llvm::Expected<std::shared_ptr<DeviceEvent>> copyInAsync(void *dst, const void *host,
                                                                   size_t bytes);

  /// What kernels created for this device are told.
  virtual KernelEnv kernelEnv() = 0;
  /// Runs or enqueues a kernel; `ctx.stream` is filled in by the device.
  virtual llvm::Error launch(Kernel &k, KernelContext &ctx) = 0;
  /// Copies `bytes` at `src` on device `from` to `dst` on this device, within
  /// a step, after the work this device already waits for.
  virtual llvm::Error receive(void *dst, Device &from, const void *src, size_t bytes) = 0;
  /// Reads `bytes` at `src` of this device into host memory, within a step
  /// (the caller has ordered it after the producer). Blocking.
  virtual llvm::Error readToHost(void *host, const void *src, size_t bytes) = 0;

  virtual std::shared_ptr<DeviceEvent> record() = 0;
  virtual llvm::Error wait(const DeviceEvent &e) = 0;
  virtual llvm::Error synchronize() = 0;

  /// Before a step of (step, microStep) is issued, captured or replayed:
  /// a device whose kernels read the step from its own memory
  /// (KernelContext::deviceStep) makes sure that memory will hold it
  /// (executor/cuda/StepCounterSync.h). Default: nothing to do.
  virtual llvm::Error beginStep(uint64_t step, uint64_t microStep) {
    return llvm::Error::success();
  }
  /// After the step's last node is issued, before synchronize(): such a
  /// device advances its counter (inside a captured graph: at every replay).
  virtual llvm::Error endStep() { return llvm::Error::success(); }

  /// Trace track names, one per stream that carries timed work; the first
  /// is compute, the second where feeds are copied.
  virtual std::vector<std::string> traceStreams() const { return {"compute", "copy"}; }
  /// Profiling: when on, launches are timed; takeTimings() after synchronize()
  /// returns them (and forgets them). `node` is the executor's node index.
  virtual void setProfiling(bool on, TraceRecorder *clock) = 0;
  virtual void noteNode(unsigned node, EventKind kind) = 0;
  virtual std::vector<LaunchTiming> takeTimings() = 0;
};

struct DeviceRequest {
  DeviceId id;       ///< cpu:1, gpu:3
  int threads = 1;   ///< CPU: the device's share of cores
  CoreBudget *cores = nullptr;
  /// CPU: the speed this device emulates, relative to the cores it runs on
  /// (0 < speed <= 1): each kernel is followed by a wait of (1/speed - 1)
  /// times its own run time, without holding cores.
  double relativeSpeed = 1.0;
  /// GPU: the physical GPU that hosts this (logical) device; -1: K of "gpu:K".
  int physicalOrdinal = -1;
  /// GPU: how long synchronize() and host waits on events wait before they
  /// give up with an error naming what is still running.
  std::chrono::milliseconds waitTimeout{std::chrono::minutes(5)};
};

} // namespace graphc
