//===- DeviceRegistry.cpp - Device backends by kind -----------------------===//

#include "executor/DeviceRegistry.h"

#include "executor/Collectives.h"
#include "ir/Diagnostics.h"

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

} // namespace graphc
