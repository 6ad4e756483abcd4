#include "tools/driver/Inspect.h"

#include "executor/MemoryPlan.h"
#include "executor/Schedule.h"
#include "ir/Diagnostics.h"
#include "placement/CostModel.h"
#include "tools/driver/Compile.h"

#include "llvm/ADT/StringExtras.h"

#include "llvm/ADT/StringMap.h"

namespace graphc {

namespace {

/// Each device's planned arena, for the order the executor will issue.
llvm::Expected<llvm::StringMap<int64_t>> peakActivations(const Module &placed) {
  const Graph &g = *placed.findGraph("main");
  auto schedule = buildSchedule(g, [](const Node &n) {
    return n.assignedDevice().empty() ? std::string("cpu:0") : n.assignedDevice();
  });
  if (!schedule)
    return schedule.takeError();
  llvm::StringMap<int64_t> peak;
  for (unsigned d = 0; d < schedule->devices.size(); ++d)
    peak[schedule->devices[d]] = planDeviceMemory(*schedule, d, nullptr).plan.arenaBytes;
  return peak;
}

std::string bytesText(int64_t b) {
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

llvm::Error checkPlanFitsCluster(const Module &compiled) {
  std::string clusterJson = compiled.meta().getString("cluster");
  if (clusterJson.empty())
    return llvm::Error::success();
  std::unique_ptr<Module> placed = runnablePart(compiled);
  auto cluster = parseClusterJson(clusterJson);
  if (!cluster)
    return cluster.takeError();
  auto cost = estimatePlacementCost(*placed, *cluster);
  if (!cost)
    return cost.takeError();
  auto peak = peakActivations(*placed);
  if (!peak)
    return peak.takeError();
  std::vector<std::string> over;
  for (const DeviceCost &d : cost->devices) {
    const ClusterDevice *dev = cluster->find(d.device);
    int64_t activations = peak->lookup(d.device);
    if (dev && d.variableBytes + activations > dev->memoryBytes)
      over.push_back(d.device + " needs " + bytesText(d.variableBytes + activations) + " (" +
                     bytesText(d.variableBytes) + " of variables, " + bytesText(activations) +
                     " of activations) and has " + bytesText(dev->memoryBytes));
  }
  if (over.empty())
    return llvm::Error::success();
  return makeError("the plan does not fit its cluster's memory: " + llvm::join(over, "; ") +
                   " (lower --batch, or give the devices their real memory_bytes)");
}

llvm::Error printPlacedReport(const Module &placed, llvm::raw_ostream &os, bool json) {
  std::string clusterJson = placed.meta().getString("cluster");
  if (clusterJson.empty())
    return makeError("module '" + placed.name() +
                     "' does not record its cluster; place it with graphc place");
  auto cluster = parseClusterJson(clusterJson);
  if (!cluster)
    return cluster.takeError();
  auto cost = estimatePlacementCost(placed, *cluster);
  if (!cost)
    return cost.takeError();
  auto peaks = peakActivations(placed);
  if (!peaks)
    return peaks.takeError();
  const llvm::StringMap<int64_t> &peak = *peaks;
  PeakActivationBytes peakOf = [&](llvm::StringRef device) -> std::optional<int64_t> {
    auto it = peak.find(device);
    if (it == peak.end())
      return std::nullopt;
    return it->second;
  };
  if (json)
    os << costReportJson(*cost, *cluster, peakOf) << "\n";
  else
    printCostReport(*cost, *cluster, os, peakOf);
  return llvm::Error::success();
}

} // namespace graphc
