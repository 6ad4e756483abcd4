//===- Device.cpp - Devices by name, through the device registry ----------===//
//
// Names no backend: each question goes to the backend of the device kind it
// is about (executor/DeviceRegistry.h).
//
//===----------------------------------------------------------------------===//

#include "executor/Device.h"

#include "executor/DeviceRegistry.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {

llvm::Expected<double> copyBandwidth(const DeviceId &from, const DeviceId &to, size_t bytes) {
  // The backend of the end that is not a host device, if either is not.
  DeviceKind kind = from.kind != DeviceKind::CPU ? from.kind : to.kind;
  const DeviceBackend *backend = DeviceRegistry::global().find(kind);
  if (!backend)
    return makeError("cannot time a copy between " + from.str() + " and " + to.str() +
                     ": this build has no " + deviceKindName(kind) + " backend");
  return backend->copyBandwidth(from, to, bytes);
}

int visibleDeviceCount(DeviceKind kind) {
  const DeviceBackend *backend = DeviceRegistry::global().find(kind);
  return backend ? backend->visibleCount() : 0;
}

std::vector<std::string> visibleDevices() {
  std::vector<std::string> out;
  for (const DeviceBackend *backend : DeviceRegistry::global().backends())
    llvm::append_range(out, backend->describeVisible());
  return out;
}

namespace {
class CompletedEvent : public DeviceEvent {
public:
  llvm::Error synchronize() const override { return llvm::Error::success(); }
};
} // namespace

llvm::Expected<std::shared_ptr<DeviceEvent>> Device::copyInAsync(void *dst, const void *host,
                                                                 size_t bytes) {
  if (auto e = copyIn(dst, host, bytes))
    return e;
  return std::make_shared<CompletedEvent>();
}

llvm::Expected<std::unique_ptr<Device>> createDevice(const DeviceRequest &req) {
  const DeviceBackend *backend = DeviceRegistry::global().find(req.id.kind);
  if (backend && backend->visibleCount() > 0)
    return backend->create(req);
  return makeError("the plan needs device '" + req.id.str() +
                   "', which this machine does not have; " +
                   "visible devices: " + llvm::join(visibleDevices(), ", ") +
                   ". Run with --emulate to map the plan's GPUs onto CPU devices");
}

} // namespace graphc
