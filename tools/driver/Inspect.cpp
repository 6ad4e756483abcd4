#include "tools/driver/Inspect.h"

#include "executor/MemoryPlan.h"
#include "executor/Schedule.h"
#include "ir/Diagnostics.h"
#include "placement/CostModel.h"

#include "llvm/ADT/StringMap.h"

namespace graphc {

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
  const Graph &g = *placed.findGraph("main");
  auto schedule = buildSchedule(g, [](const Node &n) {
    return n.assignedDevice().empty() ? std::string("cpu:0") : n.assignedDevice();
  });
  if (!schedule)
    return schedule.takeError();
  llvm::StringMap<int64_t> peak;
  for (unsigned d = 0; d < schedule->devices.size(); ++d)
    peak[schedule->devices[d]] = planDeviceMemory(*schedule, d, nullptr).plan.arenaBytes;
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
