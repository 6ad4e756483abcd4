//===- CudaDevices.cpp - The CUDA backend of the device registry ----------===//
//
// GPUs are CUDA devices: the ones the driver reports, each created as a
// CudaDevice; copies to, from and between them timed with CUDA events; their
// collectives through NCCL (or the project's own sum where logical devices
// share a GPU); a step over them captured as one CUDA graph.
//
//===----------------------------------------------------------------------===//

#include "executor/Collectives.h"
#include "executor/DeviceRegistry.h"
#include "executor/cuda/CudaDevice.h"
#include "executor/cuda/CudaStepGraph.h"
#include "ir/Diagnostics.h"

namespace graphc {
namespace {

class CudaDevices : public DeviceBackend {
public:
  DeviceKind kind() const override { return DeviceKind::GPU; }
  int visibleCount() const override { return cudaVisibleDeviceCount(); }
  std::vector<std::string> describeVisible() const override {
    std::vector<std::string> out;
    for (int i = 0, n = cudaVisibleDeviceCount(); i < n; ++i)
      out.push_back(DeviceId::gpu((unsigned)i).str() + " (" + cudaDeviceDescription(i) + ")");
    return out;
  }
  std::optional<DeviceModel> model(unsigned index) const override {
    return cudaDeviceModel((int)index);
  }
  std::string dtypeRefusal(unsigned index, DType dtype) const override {
    return cudaDTypeRefusal((int)index, dtype);
  }
  llvm::Expected<std::unique_ptr<Device>> create(const DeviceRequest &req) const override {
    auto d = CudaDevice::create(req);
    if (!d)
      return d.takeError();
    return std::unique_ptr<Device>(std::move(*d));
  }
  llvm::Expected<double> copyBandwidth(const DeviceId &from, const DeviceId &to,
                                       size_t bytes) const override {
    for (const DeviceId &d : {from, to})
      if (d.isGpu() && (int)d.index >= cudaVisibleDeviceCount())
        return makeError("cannot time a copy on " + d.str() + ": this machine has " +
                         llvm::Twine(cudaVisibleDeviceCount()) + " GPU(s)");
    return cudaCopyBandwidth(from.isGpu() ? (int)from.index : -1, to.isGpu() ? (int)to.index : -1,
                             bytes);
  }
  llvm::Expected<std::unique_ptr<CollectiveEngine>> createCollectives(
      std::chrono::milliseconds timeout, const std::map<std::string, std::vector<Device *>> &groups,
      const std::set<std::string> &acrossWorkers, CrossWorkerExchange *exchange) const override {
    return createCudaCollectives(timeout, groups, acrossWorkers, exchange);
  }
  std::unique_ptr<StepCapture> createStepCapture(llvm::ArrayRef<Device *> devices,
                                                 std::chrono::milliseconds timeout) const override {
    return createCudaStepCapture(devices, timeout);
  }
};

} // namespace

void registerCudaDevices(DeviceRegistry &r) {
  r.add(std::make_unique<CudaDevices>());
}

} // namespace graphc
