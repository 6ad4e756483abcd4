//===- DeviceRegistry.cpp - Device backends by kind -----------------------===//

#include "executor/DeviceRegistry.h"

#include "executor/Collectives.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {

// register<Name>Devices of every backend this build links (Backends.def).
#define GRAPHC_BACKEND(Name) void register##Name##Devices(DeviceRegistry &r);
#include "Backends.def"

const DeviceRegistry &DeviceRegistry::global() {
  static const DeviceRegistry *r = [] {
    auto *reg = new DeviceRegistry();
#define GRAPHC_BACKEND(Name) register##Name##Devices(*reg);
#include "Backends.def"
    return reg;
  }();
  return *r;
}

void DeviceRegistry::add(std::unique_ptr<DeviceBackend> backend) {
  std::unique_ptr<DeviceBackend> &slot = byKind_[(unsigned)backend->kind()];
  assert(!slot && "one backend per device kind");
  slot = std::move(backend);
}

const DeviceBackend *DeviceRegistry::find(DeviceKind kind) const {
  return byKind_[(unsigned)kind].get();
}

std::vector<const DeviceBackend *> DeviceRegistry::backends() const {
  std::vector<const DeviceBackend *> out;
  for (const auto &b : byKind_)
    if (b)
      out.push_back(b.get());
  return out;
}

llvm::Expected<std::unique_ptr<CollectiveEngine>>
DeviceBackend::createCollectives(std::chrono::milliseconds,
                                 const std::map<std::string, std::vector<Device *>> &groups,
                                 const std::set<std::string> &, CrossWorkerExchange *) const {
  return makeError("collective '" + (groups.empty() ? std::string() : groups.begin()->first) +
                   "': the " + deviceKindName(kind()) + " backend has no collectives");
}

//===-- Questions by device -----------------------------------------------===//

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

std::optional<DeviceModel> deviceModel(const DeviceId &id) {
  const DeviceBackend *backend = DeviceRegistry::global().find(id.kind);
  return backend ? backend->model(id.index) : std::nullopt;
}

std::vector<std::string> visibleDevices() {
  std::vector<std::string> out;
  for (const DeviceBackend *backend : DeviceRegistry::global().backends())
    llvm::append_range(out, backend->describeVisible());
  return out;
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
