#include "executor/Device.h"

#include "ir/DeviceId.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {

std::unique_ptr<Device> createCpuDevice(const DeviceRequest &req);
#if GRAPHC_HAVE_CUDA
llvm::Expected<std::unique_ptr<Device>> createCudaDevice(const DeviceRequest &req);
int cudaVisibleDeviceCount();
std::string cudaDeviceDescription(int ordinal);
#endif

int cudaDeviceCount() {
#if GRAPHC_HAVE_CUDA
  return cudaVisibleDeviceCount();
#else
  return 0;
#endif
}

std::vector<std::string> visibleDevices() {
  std::vector<std::string> out{"cpu"};
#if GRAPHC_HAVE_CUDA
  for (int i = 0, n = cudaVisibleDeviceCount(); i < n; ++i)
    out.push_back("gpu:" + std::to_string(i) + " (" + cudaDeviceDescription(i) + ")");
#endif
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
  std::optional<DeviceId> id = DeviceId::parse(req.name);
  if (id && id->type == DeviceType::CPU)
    return createCpuDevice(req);
  if (id && id->isGpu()) {
#if GRAPHC_HAVE_CUDA
    if (cudaVisibleDeviceCount() > 0)
      return createCudaDevice(req);
#endif
    return makeError("the plan needs device '" + req.name + "', which this machine does not have; " +
                     "visible devices: " + llvm::join(visibleDevices(), ", ") +
                     ". Run with --emulate to map the plan's GPUs onto CPU devices");
  }
  return makeError("unknown device '" + req.name + "' (expected cpu:N or gpu:N)");
}

} // namespace graphc
