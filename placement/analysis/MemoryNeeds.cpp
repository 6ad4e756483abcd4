#include "placement/analysis/MemoryNeeds.h"

#include "ir/Diagnostics.h"
#include "placement/analysis/MemoryPlan.h"
#include "placement/analysis/Schedule.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {

namespace {

std::string sizeText(int64_t b) {
  char buf[32];
  if (b >= 1 << 20)
    snprintf(buf, sizeof(buf), "%.1f MiB", b / double(1 << 20));
  else if (b >= 1 << 10)
    snprintf(buf, sizeof(buf), "%.1f KiB", b / double(1 << 10));
  else
    snprintf(buf, sizeof(buf), "%lld B", (long long)b);
  return buf;
}

} // namespace

llvm::Expected<llvm::StringMap<int64_t>> plannedArenaBytes(const Module &placed) {
  const Graph &g = *placed.findGraph("main");
  auto schedule = buildSchedule(
      g, [](const Node &n) { return n.assignedDevice().value_or(DeviceId::host()).str(); });
  if (!schedule)
    return schedule.takeError();
  llvm::StringMap<int64_t> peak;
  for (unsigned d = 0; d < schedule->devices.size(); ++d)
    peak[schedule->devices[d]] = planDeviceMemory(*schedule, d, nullptr).plan.arenaBytes;
  return peak;
}

std::string MemoryNeed::text() const {
  return device + " needs " + sizeText(total()) + " (" + sizeText(variables) + " of variables, " +
         sizeText(activations) + " of activations) and has " + sizeText(capacity);
}

llvm::Expected<std::vector<MemoryNeed>> memoryNeeds(const Module &runnable, const Cluster &cluster,
                                                    const PlacementCost &cost) {
  auto peak = plannedArenaBytes(runnable);
  if (!peak)
    return peak.takeError();
  std::vector<MemoryNeed> needs;
  for (const DeviceCost &d : cost.devices)
    if (const ClusterDevice *dev = cluster.find(d.device))
      needs.push_back(
          {d.device, d.variableBytes, peak->lookup(d.device), dev->memoryBytes, dev->kind});
  return needs;
}

llvm::Error checkFits(llvm::ArrayRef<MemoryNeed> needs) {
  std::vector<std::string> over;
  for (const MemoryNeed &n : needs)
    if (!n.fits())
      over.push_back(n.text());
  if (over.empty())
    return llvm::Error::success();
  return makeError("the plan does not fit its cluster's memory: " + llvm::join(over, "; ") +
                   " (lower --batch, give the devices their real memory_bytes, or let --params "
                   "auto move the variables)");
}

llvm::Expected<std::vector<MemoryNeed>> memoryNeeds(const Module &runnable) {
  if (!runnable.plan().cluster)
    return std::vector<MemoryNeed>{};
  const Cluster &cluster = *runnable.plan().cluster;
  auto cost = estimatePlacementCost(runnable, cluster);
  if (!cost)
    return cost.takeError();
  return memoryNeeds(runnable, cluster, *cost);
}

} // namespace graphc
