#include "passes/strategy/CompileRequest.h"

#include "ir/Diagnostics.h"
#include "kernels/Kernel.h"

namespace graphc {

std::vector<unsigned> PlacementRequest::workerGpus() const {
  if (tasks)
    return tasks->workerGpus();
  return std::vector<unsigned>((size_t)std::max(1, workers), (unsigned)std::max(0, gpus));
}

llvm::Expected<Cluster> clusterFor(const PlacementRequest &place) {
  if (place.cluster)
    return *place.cluster;
  if (!place.clusterFile.empty())
    return loadClusterFile(place.clusterFile);
  if (place.gpus <= 0)
    return makeError("--gpus must be at least 1");
  if ((unsigned)place.gpus >= Cluster::kMaxDevices)
    return makeError("--gpus " + llvm::Twine(place.gpus) +
                     " is more than graphc places on: at most " +
                     llvm::Twine(Cluster::kMaxDevices - 1) + " GPUs (" +
                     llvm::Twine(Cluster::kMaxDevices) + " devices with the host)");
  if (place.calibratedFile.empty())
    return Cluster::defaultCluster(place.gpus);
  auto calibrated = loadClusterFile(place.calibratedFile);
  if (!calibrated)
    return calibrated.takeError();
  auto cluster = Cluster::ofCalibrated(*calibrated, place.gpus);
  if (!cluster)
    return withContext(cluster.takeError(), place.calibratedFile);
  return cluster;
}

/// A build without a GPU backend registers no GPU kernels; it plans as a GPU
/// build would, taking the CPU kernels as the measure of what exists.
bool kernelFor(const Node &n, DeviceKind kind) {
  static const bool haveGpuKernels =
      KernelRegistry::global().find(Op::Conv, DeviceKind::GPU, DType::F32) != nullptr;
  return KernelRegistry::global().supports(n, haveGpuKernels ? kind : DeviceKind::CPU);
}

} // namespace graphc
