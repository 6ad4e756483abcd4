//===- Device.cpp - What every device shares ------------------------------===//

#include "executor/Device.h"

namespace graphc {

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

} // namespace graphc
