//===- CostReport.cpp - The `graphc inspect` table and its JSON form --------===//
//
// Units are chosen for reading, not for precision: GFLOP per step, MiB,
// milliseconds. The JSON form carries the raw figures.
//
//===----------------------------------------------------------------------===//

#include "placement/CostReport.h"

#include "llvm/Support/Format.h"

#include <array>
#include <map>

namespace graphc {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}
std::string mib(int64_t bytes) {
  return fixed((double)bytes / (1 << 20), 1);
}
std::string ms(double seconds) {
  return fixed(seconds * 1e3, 3);
}

std::optional<int64_t> peakOf(const PeakActivationBytes &peak, llvm::StringRef device) {
  return peak ? peak(device) : std::nullopt;
}

/// Variables plus peak activations over the device's memory.
bool overMemory(const DeviceCost &d, const Cluster &c, std::optional<int64_t> peak) {
  const ClusterDevice *dev = c.find(d.device);
  return dev && d.variableBytes + peak.value_or(0) > dev->memoryBytes;
}

} // namespace

void printTable(llvm::ArrayRef<std::vector<std::string>> rows, llvm::raw_ostream &os,
                unsigned leftColumns) {
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto &r : rows)
    for (size_t i = 0; i < r.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  for (const auto &r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      std::string pad(width[i] - r[i].size(), ' ');
      std::string gap(i ? 2 : 0, ' ');
      // Names left, numbers right.
      line += i < leftColumns ? gap + r[i] + pad : gap + pad + r[i];
    }
    os << llvm::StringRef(line).rtrim() << '\n';
  }
}

void printCostReport(const PlacementCost &cost, const Cluster &c, llvm::raw_ostream &os,
                     const PeakActivationBytes &peak) {
  std::vector<std::vector<std::string>> rows{{"device", "nodes", "GFLOP", "var MiB", "peak act MiB",
                                              "in MiB", "out MiB", "compute ms", "comm ms",
                                              "step ms"}};
  std::vector<std::string> overfull;
  for (const DeviceCost &d : cost.devices) {
    std::optional<int64_t> p = peakOf(peak, d.device);
    bool over = overMemory(d, c, p);
    if (over)
      overfull.push_back(d.device);
    rows.push_back({d.device + (over ? " !" : ""), std::to_string(d.nodes),
                    fixed((double)d.flops / 1e9, 2), mib(d.variableBytes), p ? mib(*p) : "-",
                    mib(d.bytesIn), mib(d.bytesOut), ms(d.computeSeconds), ms(d.commSeconds),
                    ms(d.stepSeconds)});
  }
  os << "per device, per step:\n";
  printTable(rows, os);

  os << "\ntraffic between devices per step:\n";
  if (cost.traffic.empty()) {
    os << "  none\n";
  } else {
    std::vector<std::vector<std::string>> t{{"  from -> to", "MiB", "ms"}};
    for (const DeviceTraffic &x : cost.traffic)
      t.push_back({"  " + x.from + " -> " + x.to, mib(x.bytes), ms(x.seconds)});
    t.push_back({"  total", mib(cost.totalTrafficBytes()), ""});
    printTable(t, os);
  }

  const DeviceCost *slowest = cost.find(cost.slowestDevice);
  os << "\npredicted step time: " << ms(cost.stepSeconds) << " ms";
  if (slowest && cost.stepSeconds > 0)
    os << " on " << slowest->device << " ("
       << (slowest->computeSeconds >= slowest->commSeconds ? "compute" : "communication")
       << "-bound)";
  os << "; communication "
     << (cost.overlap ? "overlapped with compute (max of the two)"
                      : "serial with compute (their sum)")
     << "\n";
  for (const std::string &d : overfull) {
    const DeviceCost &dc = *cost.find(d);
    os << "warning: " << d << " needs " << mib(dc.variableBytes + peakOf(peak, d).value_or(0))
       << " MiB (variables" << (peakOf(peak, d) ? " and peak activations" : "") << ") but has "
       << mib(c.find(d)->memoryBytes) << " MiB\n";
  }
}

std::string describeShardedSlots(const Module &m) {
  int64_t whole = 0;
  std::map<DeviceId, int64_t> held;
  size_t ranks = 0;
  for (const Variable &v : m.variables()) {
    if (!v.sharded)
      continue;
    whole += v.type.bytes();
    ranks = std::max(ranks, v.devices.size());
    for (DeviceId d : v.devices)
      held[d] += v.bytesOn(d);
  }
  if (held.empty())
    return "";
  int64_t most = 0;
  for (auto &[device, bytes] : held)
    most = std::max(most, bytes);
  return "optimizer slots sharded over " + std::to_string(ranks) + " devices: " + mib(most) +
         " MiB on each at most (" + mib(whole) +
         " MiB whole, which each device would hold without --shard-optimizer)";
}

llvm::json::Value costReportJson(const PlacementCost &cost, const Cluster &c,
                                 const PeakActivationBytes &peak) {
  llvm::json::Array devices, traffic;
  for (const DeviceCost &d : cost.devices) {
    std::optional<int64_t> p = peakOf(peak, d.device);
    const ClusterDevice *dev = c.find(d.device);
    devices.push_back(llvm::json::Object{
        {"device", d.device},
        {"kind", dev ? deviceKindName(dev->kind) : llvm::StringRef("?")},
        {"memory_bytes", dev ? dev->memoryBytes : 0},
        {"nodes", d.nodes},
        {"flops", d.flops},
        {"variable_bytes", d.variableBytes},
        {"peak_activation_bytes", p ? llvm::json::Value(*p) : llvm::json::Value(nullptr)},
        {"bytes_in", d.bytesIn},
        {"bytes_out", d.bytesOut},
        {"all_reduce_bytes", d.allReduceBytes},
        {"compute_seconds", d.computeSeconds},
        {"comm_seconds", d.commSeconds},
        {"step_seconds", d.stepSeconds},
        {"over_memory", overMemory(d, c, p)}});
  }
  for (const DeviceTraffic &t : cost.traffic)
    traffic.push_back(llvm::json::Object{
        {"from", t.from}, {"to", t.to}, {"bytes", t.bytes}, {"seconds", t.seconds}});
  return llvm::json::Object{{"devices", std::move(devices)},
                            {"traffic", std::move(traffic)},
                            {"total_traffic_bytes", cost.totalTrafficBytes()},
                            {"overlap", cost.overlap},
                            {"step_seconds", cost.stepSeconds},
                            {"slowest_device", cost.slowestDevice}};
}

} // namespace graphc
