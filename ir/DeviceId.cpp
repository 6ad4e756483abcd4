//===- DeviceId.cpp - Device names ------------------------------------------===//

#include "ir/DeviceId.h"

#include <ostream>

namespace graphc {

llvm::StringRef deviceKindName(DeviceKind k) {
  return k == DeviceKind::GPU ? "gpu" : "cpu";
}

std::optional<DeviceKind> parseDeviceKind(llvm::StringRef s) {
  if (s == "cpu")
    return DeviceKind::CPU;
  if (s == "gpu")
    return DeviceKind::GPU;
  return std::nullopt;
}

std::optional<DeviceId> DeviceId::parse(llvm::StringRef name) {
  auto [prefix, number] = name.split(':');
  std::optional<DeviceKind> kind = parseDeviceKind(prefix);
  unsigned index = 0;
  if (!kind || number.empty() || number.getAsInteger(10, index))
    return std::nullopt;
  return DeviceId{*kind, index};
}

std::string DeviceId::str() const {
  return deviceKindName(kind).str() + ":" + std::to_string(index);
}

std::ostream &operator<<(std::ostream &os, DeviceId d) {
  return os << d.str();
}

std::string deviceText(std::optional<DeviceId> d) {
  return d ? d->str() : std::string();
}

std::string joinDevices(llvm::ArrayRef<DeviceId> devices) {
  std::string s;
  for (DeviceId d : devices)
    s += (s.empty() ? "" : ", ") + d.str();
  return s;
}

} // namespace graphc
