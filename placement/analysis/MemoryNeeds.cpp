#include "placement/analysis/MemoryNeeds.h"

#include "ir/MemoryLimit.h"
#include "placement/analysis/MemoryPlan.h"
#include "placement/analysis/Schedule.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

namespace graphc {

namespace {

/// Each device's planned arena for graph main, in parts.
llvm::Expected<llvm::StringMap<ArenaParts>> plannedArenas(const Module &placed) {
  const Graph &g = *placed.findGraph("main");
  auto schedule = buildSchedule(
      g, [](const Node &n) { return n.assignedDevice().value_or(DeviceId::host()).str(); });
  if (!schedule)
    return schedule.takeError();
  llvm::StringMap<ArenaParts> arenas;
  for (unsigned d = 0; d < schedule->devices.size(); ++d)
    arenas[schedule->devices[d]] = arenaParts(planDeviceMemory(*schedule, d, nullptr));
  return arenas;
}

} // namespace

llvm::Expected<llvm::StringMap<int64_t>> plannedArenaBytes(const Module &placed) {
  auto arenas = plannedArenas(placed);
  if (!arenas)
    return arenas.takeError();
  llvm::StringMap<int64_t> bytes;
  for (const auto &a : *arenas)
    bytes[a.getKey()] = a.getValue().activations + a.getValue().copies + a.getValue().gaps;
  return bytes;
}

std::string MemoryNeed::text() const {
  std::string parts =
      "variables " + bytesText(variables) + " + optimizer slots " + bytesText(slots);
  if (accumulators)
    parts += " + gradient accumulators " + bytesText(accumulators);
  parts += " + peak activations " + bytesText(activations) + " + copies " + bytesText(copies);
  if (gaps)
    parts += " + layout gaps " + bytesText(gaps);
  std::string text =
      device + " needs " + bytesText(total()) + " = " + parts + ", and has " + bytesText(capacity);
  // Rounded, a need a few bytes over its memory reads as equal to it.
  if (!fits())
    text += " (" + bytesText(total() - capacity) + " short)";
  return text;
}

std::string MemoryNeed::brief() const {
  return device + " needs " + bytesText(total()) + " of " + bytesText(capacity);
}

const MemoryNeed *mostShort(llvm::ArrayRef<MemoryNeed> needs) {
  const MemoryNeed *most = nullptr;
  for (const MemoryNeed &n : needs)
    if (!n.fits() && (!most || n.total() - n.capacity > most->total() - most->capacity))
      most = &n;
  return most;
}

int64_t shortfall(llvm::ArrayRef<MemoryNeed> needs) {
  const MemoryNeed *most = mostShort(needs);
  return most ? most->total() - most->capacity : 0;
}

llvm::Expected<std::vector<MemoryNeed>> memoryNeeds(const Module &runnable,
                                                    const Cluster &cluster) {
  auto arenas = plannedArenas(runnable);
  if (!arenas)
    return arenas.takeError();
  std::vector<MemoryNeed> needs;
  for (const ClusterDevice &d : cluster.devices()) {
    MemoryNeed n;
    n.device = d.name;
    n.capacity = d.memoryBytes;
    n.kind = d.kind;
    ArenaParts arena = arenas->lookup(d.name);
    n.activations = arena.activations;
    n.copies = arena.copies;
    n.gaps = arena.gaps;
    needs.push_back(std::move(n));
  }
  // A variable's storage counts on each device that holds a replica, as in
  // the cost model; a sharded optimizer slot counts only the piece the device
  // holds (--shard-optimizer: the executor keeps its rank's piece only).
  for (const Variable &v : runnable.variables())
    for (DeviceId at : v.devices)
      if (auto i = cluster.indexOf(at)) {
        MemoryNeed &n = needs[*i];
        (v.kind == VarKind::Slot          ? n.slots
         : v.kind == VarKind::Accumulator ? n.accumulators
                                          : n.variables) += v.bytesOn(at);
      }
  return needs;
}

llvm::Expected<std::vector<MemoryNeed>> memoryNeeds(const Module &runnable) {
  if (!runnable.plan().cluster)
    return std::vector<MemoryNeed>{};
  return memoryNeeds(runnable, *runnable.plan().cluster);
}

char MemoryMisfit::ID = 0;

MemoryMisfit::MemoryMisfit(std::string headline, std::vector<MemoryNeed> needs, std::string detail)
    : headline_(std::move(headline)), detail_(std::move(detail)), needs_(std::move(needs)) {}

void MemoryMisfit::log(llvm::raw_ostream &os) const {
  os << headline_;
  if (std::string each = misfitText(needs_); !each.empty())
    os << ": " << each;
  if (!detail_.empty())
    os << "; " << detail_;
  if (!advice_.empty())
    os << "; " << advice_;
}

std::string misfitText(llvm::ArrayRef<MemoryNeed> needs) {
  std::vector<std::string> over, fit;
  const MemoryNeed *fullest = nullptr; // of those that fit, by share of its memory
  for (const MemoryNeed &n : needs) {
    if (!n.fits()) {
      over.push_back(n.text());
      continue;
    }
    fit.push_back(n.device);
    if (!fullest || (double)n.total() * (double)fullest->capacity >
                        (double)fullest->total() * (double)n.capacity)
      fullest = &n;
  }
  if (over.empty())
    return "";
  std::string text = llvm::join(over, "; ");
  if (fit.size() == 1)
    text += "; " + fit[0] + " fits (" + bytesText(fullest->total()) + " of " +
            bytesText(fullest->capacity) + ")";
  else if (!fit.empty())
    text += "; " + llvm::join(fit, ", ") + " fit (the fullest, " + fullest->device + ", needs " +
            bytesText(fullest->total()) + " of " + bytesText(fullest->capacity) + ")";
  return text;
}

llvm::Error checkFits(llvm::ArrayRef<MemoryNeed> needs) {
  if (llvm::all_of(needs, [](const MemoryNeed &n) { return n.fits(); }))
    return llvm::Error::success();
  return llvm::make_error<MemoryMisfit>("the plan does not fit its cluster's memory",
                                        std::vector<MemoryNeed>(needs.begin(), needs.end()));
}

} // namespace graphc
