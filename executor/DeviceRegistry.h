//===- DeviceRegistry.h - Device backends by kind ----------------*- C++ -*-===//
//
// Generic executor code reaches a backend only through this table, as it
// reaches kernels through the KernelRegistry: each backend implements one
// DeviceBackend for its device kind (executor/cpu/CpuDevice.cpp,
// executor/cuda/CudaDevices.cpp) and registers it; createDevice, the device
// listings, copy timing and the executor's backend-specific choices
// (Winograd's retry, GPU collectives, step capture) ask the registry by kind.
//
// Registration survives static linking the way the kernels' does: global()
// calls every linked backend's register<Name>Devices itself, from the list
// the build generates (Backends.def, cmake/Dependencies.cmake), so generic
// code names no backend and no object file depends on being pulled in by a
// static initializer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Device.h"
#include "executor/StepCapture.h"
#include "ir/DType.h"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace graphc {

class CollectiveEngine;
class CrossWorkerExchange;

/// What generic code needs from the backend of one device kind.
class DeviceBackend {
public:
  virtual ~DeviceBackend() = default;
  virtual DeviceKind kind() const = 0;

  /// Devices of this kind usable now (0: none, e.g. GPUs without a driver).
  virtual int visibleCount() const = 0;
  /// This kind's entries of visibleDevices(): "cpu", "gpu:0 (NVIDIA H100, 79 GiB)", ...
  virtual std::vector<std::string> describeVisible() const = 0;
  /// The device a request names (a name of this kind).
  virtual llvm::Expected<std::unique_ptr<Device>> create(const DeviceRequest &req) const = 0;
  /// copyBandwidth() between `from` and `to`: one of them of this kind, the
  /// other of this kind or the host.
  virtual llvm::Expected<double> copyBandwidth(const DeviceId &from, const DeviceId &to,
                                               size_t bytes) const = 0;

  /// The model of device `index` of this kind, or none where there is no
  /// such device or the kind has no models (the host). Default: none.
  virtual std::optional<DeviceModel> model(unsigned index) const { return std::nullopt; }
  /// Why device `index` of this kind cannot compute in `dtype` (bf16 on a
  /// GPU before compute capability 8.0), or "" where it can or where there is
  /// no such device to ask (creating it reports that). Default: it can.
  virtual std::string dtypeRefusal(unsigned index, DType dtype) const { return ""; }
  /// Whether --conv-algorithm auto may compute convolutions here by
  /// Winograd, whose scratch a direct binding avoids (Executor::create retries
  /// with direct convolutions under a memory limit). Default: no.
  virtual bool autoConvolutionsMayUseWinograd() const { return false; }
  /// The collective engine for groups of this kind's devices (devices by
  /// rank); the groups named in `acrossWorkers` also span the other workers'
  /// devices, connected through `exchange`. Default: an error.
  virtual llvm::Expected<std::unique_ptr<CollectiveEngine>> createCollectives(
      std::chrono::milliseconds timeout, const std::map<std::string, std::vector<Device *>> &groups,
      const std::set<std::string> &acrossWorkers, CrossWorkerExchange *exchange) const;
  /// A whole step over `devices` (all of this kind) captured as one graph,
  /// or null where the backend cannot (default).
  virtual std::unique_ptr<StepCapture> createStepCapture(llvm::ArrayRef<Device *> devices,
                                                         std::chrono::milliseconds timeout) const {
    return nullptr;
  }
};

class DeviceRegistry {
public:
  /// The registry with every backend this build links.
  static const DeviceRegistry &global();

  void add(std::unique_ptr<DeviceBackend> backend);
  /// The backend of a kind, or null where this build has none.
  const DeviceBackend *find(DeviceKind kind) const;
  /// Every registered backend, by kind.
  std::vector<const DeviceBackend *> backends() const;

private:
  std::unique_ptr<DeviceBackend> byKind_[kNumDeviceKinds];
};

//===-- Questions by device, answered by the backend of its kind -----------===//

/// Creates the device a request names, through the backend of its kind
/// (executor/DeviceRegistry.h; GPUs need the CUDA backend, built in when the
/// toolkit was found at configure time); an error lists the devices that are
/// visible.
llvm::Expected<std::unique_ptr<Device>> createDevice(const DeviceRequest &req);

/// Devices this process can see, for error messages: "cpu", "gpu:0 (NVIDIA H100)", ...
std::vector<std::string> visibleDevices();

/// Number of devices of a kind usable now (GPUs: 0 without a driver, a GPU
/// or a backend for them).
int visibleDeviceCount(DeviceKind kind);

/// The model of a physical device (a GPU this machine has), or none.
std::optional<DeviceModel> deviceModel(const DeviceId &id);

/// Bytes per second of a `bytes` copy from device `from` to `to` ("cpu:0",
/// "gpu:K" for physical GPU K; two CPU devices: a memcpy in this machine's
/// memory), the best of a few after a warm-up. An error without a backend for
/// the devices, or for a GPU this machine does not have.
llvm::Expected<double> copyBandwidth(const DeviceId &from, const DeviceId &to,
                                     size_t bytes = 64u << 20);

} // namespace graphc
