#include "tools/driver/Emulation.h"

#include "executor/DeviceRegistry.h"
#include "ir/Cluster.h"
#include "ir/DeviceId.h"

#include "llvm/ADT/STLExtras.h"

#include <map>

namespace graphc {

namespace {

/// The relative speeds of the plan's GPUs in the cluster it was placed for,
/// scaled so that the fastest is 1 (emulation can slow a device, not speed
/// one up); empty when they are all equal or the plan has no cluster.
std::map<DeviceId, double> emulatedSpeeds(const Module &placed, llvm::ArrayRef<DeviceId> gpus) {
  std::map<DeviceId, double> speeds;
  const std::optional<Cluster> &cluster = placed.plan().cluster;
  if (!cluster)
    return speeds;
  double fastest = 0;
  for (DeviceId gpu : gpus)
    if (const ClusterDevice *d = cluster->find(gpu))
      fastest = std::max(fastest, d->relativeSpeed);
  for (DeviceId gpu : gpus)
    if (const ClusterDevice *d = cluster->find(gpu); d && d->relativeSpeed < fastest)
      speeds[gpu] = d->relativeSpeed / fastest;
  return speeds;
}

} // namespace

/// On CPU devices, GPUs slower than the plan's fastest in its cluster run at
/// their relative speed.
std::string emulateDevices(const Module &placed, ExecutorOptions &exec) {
  std::vector<DeviceId> gpus;
  for (const Node *n : placed.findGraph("main")->nodes())
    if (std::optional<DeviceId> d = n->assignedDevice(); d && d->isGpu())
      gpus.push_back(*d);
  llvm::sort(gpus);
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  int physical = visibleDeviceCount(DeviceKind::GPU);
  if (gpus.empty())
    return "";
  const std::map<DeviceId, double> speeds = emulatedSpeeds(placed, gpus);
  std::string slower;
  for (auto &[gpu, speed] : speeds) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", speed);
    slower += (slower.empty() ? "" : ", ") + gpu.str() + " at " + text;
  }
  if (physical > 0) {
    exec.physicalGpu = [physical](DeviceId gpu) { return (int)(gpu.index % physical); };
    return "the plan's " + std::to_string(gpus.size()) + " GPUs run as logical devices on " +
           std::to_string(physical) + " physical GPU" + (physical > 1 ? "s" : "") +
           (slower.empty() ? ""
                           : " (relative speeds are emulated on CPU devices only: " + slower +
                                 " run at full speed)");
  }
  auto cpuOf = [](DeviceId d) { return d.isGpu() ? DeviceId::cpu(d.index + 1) : d; };
  exec.deviceMap = cpuOf;
  for (auto &[gpu, speed] : speeds)
    exec.relativeSpeed[cpuOf(gpu)] = speed;
  std::string devices = gpus.size() == 1
                            ? "GPU runs as CPU device cpu:1"
                            : "GPUs run as CPU devices cpu:1..cpu:" + std::to_string(gpus.size());
  return "no GPU here: the plan's " + std::to_string(gpus.size()) + " " + devices +
         " sharing this machine's cores" +
         (slower.empty() ? "" : "; emulated relative speeds (the fastest GPU is 1): " + slower);
}

} // namespace graphc
