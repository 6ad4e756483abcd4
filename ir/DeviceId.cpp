//===- DeviceId.cpp - Device names ------------------------------------------===//

#include "ir/DeviceId.h"

namespace graphc {

llvm::StringRef deviceTypeName(DeviceType t) {
  return t == DeviceType::GPU ? "gpu" : "cpu";
}

std::optional<DeviceType> parseDeviceType(llvm::StringRef s) {
  if (s == "cpu")
    return DeviceType::CPU;
  if (s == "gpu")
    return DeviceType::GPU;
  return std::nullopt;
}

std::optional<DeviceId> DeviceId::parse(llvm::StringRef name) {
  auto [kind, number] = name.split(':');
  auto type = parseDeviceType(kind);
  unsigned index = 0;
  if (!type || number.empty() || number.getAsInteger(10, index))
    return std::nullopt;
  return DeviceId{*type, index};
}

std::string DeviceId::str() const {
  return deviceTypeName(type).str() + ":" + std::to_string(index);
}

std::optional<unsigned> gpuIndexOf(llvm::StringRef name) {
  auto d = DeviceId::parse(name);
  if (!d || !d->isGpu())
    return std::nullopt;
  return d->index;
}

} // namespace graphc
