#include "executor/Device.h"

#include "ir/DeviceId.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

#include <chrono>
#include <cstring>
#include <vector>

namespace graphc {

std::unique_ptr<Device> createCpuDevice(const DeviceRequest &req);
#if GRAPHC_HAVE_CUDA
llvm::Expected<std::unique_ptr<Device>> createCudaDevice(const DeviceRequest &req);
int cudaVisibleDeviceCount();
std::string cudaDeviceDescription(int ordinal);
llvm::Expected<double> cudaCopyBandwidth(int from, int to, size_t bytes);
#endif

llvm::Expected<double> copyBandwidth(const DeviceId &from, const DeviceId &to, size_t bytes) {
  if (!from.isGpu() && !to.isGpu()) {
    std::vector<char> a(bytes, 1), b(bytes, 0);
    double best = 0;
    for (int i = 0; i < 6; ++i) { // the first touches the pages
      auto t0 = std::chrono::steady_clock::now();
      std::memcpy(b.data(), a.data(), bytes);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i > 0 && s > 0)
        best = std::max(best, bytes / s);
      a[i] = b[bytes - 1 - i]; // keep the copies observable
    }
    return best;
  }
#if GRAPHC_HAVE_CUDA
  for (const DeviceId &d : {from, to})
    if (d.isGpu() && (int)d.index >= cudaVisibleDeviceCount())
      return makeError("cannot time a copy on " + d.str() + ": this machine has " +
                       llvm::Twine(cudaVisibleDeviceCount()) + " GPU(s)");
  return cudaCopyBandwidth(from.isGpu() ? (int)from.index : -1, to.isGpu() ? (int)to.index : -1,
                           bytes);
#else
  return makeError("cannot time a copy between " + from.str() + " and " + to.str() +
                   ": this build has no CUDA backend");
#endif
}

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
  if (id && id->kind == DeviceKind::CPU)
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
