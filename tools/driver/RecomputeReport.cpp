#include "tools/driver/RecomputeReport.h"

#include "passes/strategy/RecomputeMeasures.h"
#include "placement/CostReport.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace graphc {

namespace {

std::string percent(double part, double whole) {
  return whole > 0 ? llvm::formatv("{0:f1}%", 100 * part / whole).str() : "-";
}

} // namespace

std::string describeRecompute(const Module &placed) {
  std::vector<DeviceRecompute> devices = recomputeByDevice(placed);
  if (devices.empty())
    return "";
  unsigned copies = 0;
  const DeviceRecompute *most = &devices.front();
  for (const DeviceRecompute &d : devices) {
    copies += d.nodes;
    if (d.flops * most->deviceFlops > most->flops * d.deviceFlops)
      most = &d;
  }
  return "--recompute auto: " + std::to_string(copies) + (copies == 1 ? " copy" : " copies") +
         " in the backward pass, +" +
         percent((double)most->flops, (double)(most->deviceFlops - most->flops)) + " FLOPs and +" +
         percent(most->seconds, most->deviceSeconds - most->seconds) + " kernel time on " +
         most->device;
}

void printRecomputeReport(const Module &placed, llvm::raw_ostream &os,
                          std::optional<double> stepSeconds) {
  std::vector<DeviceRecompute> devices = recomputeByDevice(placed);
  if (devices.empty())
    return;
  os << "\nrecomputed in the backward pass (--recompute auto), per step:\n";
  std::vector<std::vector<std::string>> rows{
      {"device", "copies", "GFLOP", "of its FLOPs", "kernel ms", "of its kernels"}};
  if (stepSeconds)
    rows[0].push_back("of the step");
  for (const DeviceRecompute &d : devices) {
    rows.push_back({d.device, std::to_string(d.nodes), llvm::formatv("{0:f2}", d.flops / 1e9).str(),
                    percent((double)d.flops, (double)d.deviceFlops),
                    llvm::formatv("{0:f2}", d.seconds * 1e3).str(),
                    percent(d.seconds, d.deviceSeconds)});
    if (stepSeconds)
      rows.back().push_back(percent(d.seconds, *stepSeconds));
  }
  printTable(rows, os, /*leftColumns=*/1);
  std::vector<std::string> names = recomputedNodes(placed);
  os << "recomputes " << names.size() << " nodes: " << llvm::join(names, ", ") << "\n";
}

std::optional<llvm::json::Value> recomputeReportJson(const Module &placed,
                                                     std::optional<double> stepSeconds) {
  std::vector<DeviceRecompute> devices = recomputeByDevice(placed);
  if (devices.empty())
    return std::nullopt;
  llvm::json::Array list;
  for (const DeviceRecompute &d : devices) {
    llvm::json::Object o{{"device", d.device},
                         {"copies", (int64_t)d.nodes},
                         {"flops", d.flops},
                         {"device_flops", d.deviceFlops},
                         {"kernel_seconds", d.seconds},
                         {"device_kernel_seconds", d.deviceSeconds}};
    if (stepSeconds)
      o["step_fraction"] = *stepSeconds > 0 ? d.seconds / *stepSeconds : 0.0;
    list.push_back(std::move(o));
  }
  return llvm::json::Object{{"devices", std::move(list)},
                            {"recomputed", llvm::json::Array(recomputedNodes(placed))}};
}

} // namespace graphc
