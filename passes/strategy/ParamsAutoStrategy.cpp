#include "passes/strategy/ParamsAutoStrategy.h"

#include "ir/Diagnostics.h"
#include "passes/strategy/CompiledModule.h"
#include "passes/strategy/DataParallelStrategy.h"
#include "passes/strategy/ParameterServerStrategy.h"
#include "placement/analysis/CostModel.h"
#include "placement/analysis/MemoryNeeds.h"
#include "placement/analysis/StepSimulator.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

namespace graphc {

namespace {

/// Steps this close to the best (relative) count as tied.
constexpr double kTie = 0.02;

/// All-reduce bucket caps (bytes) mirrored is also tried with, besides
/// --bucket-mb's; the last is above every model here: one bucket per step.
constexpr int64_t kBucketCaps[] = {1'000'000, 4'000'000, 16'000'000, 64'000'000, 1LL << 40};

struct Candidate {
  ParamPlacement mode;
  int64_t bucketBytes = 0; ///< mirrored: the bucket cap; 0: another mode
  std::string refused;     ///< the compile's error
  std::string unfit;       ///< the devices that do not fit
  double step = 0;
  std::string bottleneck; ///< "compute on gpu:0", "communication on cpu:0"
  int64_t traffic = 0;
  std::string fullestGpu; ///< the GPU that needs the most memory
  int64_t fullestGpuBytes = 0;
  std::vector<MemoryNeed> needs; ///< every device's, when compiled
  bool usable() const { return refused.empty() && unfit.empty(); }
};

std::string ms(double seconds) {
  return llvm::formatv("{0:f2} ms", seconds * 1e3).str();
}
std::string mib(int64_t bytes) {
  return llvm::formatv("{0:f1} MiB", bytes / 1048576.0).str();
}

/// "mirrored, 4 MB buckets", "mirrored, one bucket", "spread".
std::string nameOf(const Candidate &c) {
  if (c.bucketBytes == 0)
    return modeName(c.mode);
  if (c.bucketBytes >= (1LL << 40))
    return modeName(c.mode) + ", one bucket";
  char cap[32];
  std::snprintf(cap, sizeof cap, "%g", c.bucketBytes / 1e6);
  return modeName(c.mode) + ", " + cap + " MB buckets";
}

/// gpu:K with the most memory, then the fastest, then the lowest index.
ParamPlacement largestGpu(const Cluster &c) {
  const ClusterDevice *best = nullptr;
  for (const ClusterDevice &d : c.devices())
    if (d.id.isGpu() &&
        (!best || d.memoryBytes > best->memoryBytes ||
         (d.memoryBytes == best->memoryBytes && d.relativeSpeed > best->relativeSpeed)))
      best = &d;
  return ParamPlacement::onGpu(best ? best->id.index : 0);
}

/// Fills in a compiled candidate's predicted step (the simulator's: the
/// executor's order, overlap of each bucket's all-reduce with the backward
/// pass), bottleneck (the cost model's busiest device), traffic and memory.
llvm::Error measure(const Module &plan, Candidate &c) {
  if (!plan.plan().cluster)
    return makeError("module '" + plan.name() + "' does not record its cluster");
  const Cluster *cluster = &*plan.plan().cluster;
  std::unique_ptr<Module> runnable = runnablePart(plan);
  auto cost = estimatePlacementCost(*runnable, *cluster);
  if (!cost)
    return cost.takeError();
  auto needs = memoryNeeds(*runnable, *cluster);
  if (!needs)
    return needs.takeError();
  auto simulated = simulateStep(*runnable, *cluster, SimOptions());
  if (!simulated)
    return simulated.takeError();
  c.step = simulated->stepSeconds;
  c.traffic = cost->totalTrafficBytes();
  if (const DeviceCost *slow = cost->find(cost->slowestDevice))
    c.bottleneck =
        (slow->commSeconds > slow->computeSeconds ? "communication on " : "compute on ") +
        slow->device;
  std::vector<std::string> over;
  for (const MemoryNeed &n : *needs) {
    if (!n.fits())
      over.push_back(n.text());
    if (n.kind == DeviceKind::GPU && (c.fullestGpu.empty() || n.total() > c.fullestGpuBytes)) {
      c.fullestGpuBytes = n.total();
      c.fullestGpu = n.device;
    }
  }
  c.unfit = llvm::join(over, "; ");
  c.needs = std::move(*needs);
  return llvm::Error::success();
}

/// Whether `a` is to be preferred to `b`, both usable.
bool better(const Candidate &a, const Candidate &b) {
  double slower = std::max(a.step, b.step);
  if (std::abs(a.step - b.step) > kTie * slower)
    return a.step < b.step;
  if (a.fullestGpuBytes != b.fullestGpuBytes)
    return a.fullestGpuBytes < b.fullestGpuBytes;
  return a.traffic < b.traffic;
}

std::string why(const std::vector<Candidate> &all, const Candidate &chosen) {
  std::string text = "--params auto chose " + nameOf(chosen) + ": predicted step " +
                     ms(chosen.step) + " (" + chosen.bottleneck + ")";
  std::vector<std::string> tied, tiedCaps, slower, unusable;
  for (const Candidate &c : all) {
    if (&c == &chosen)
      continue;
    if (!c.refused.empty())
      unusable.push_back(nameOf(c) + " not possible");
    else if (!c.unfit.empty())
      unusable.push_back(nameOf(c) + " does not fit");
    else if (std::abs(c.step - chosen.step) <= kTie * std::max(c.step, chosen.step))
      (c.bucketBytes ? tiedCaps : tied).push_back(nameOf(c));
    else
      slower.push_back(nameOf(c) + " " + ms(c.step) + " (" + c.bottleneck + ")");
  }
  // Mirrored at several bucket caps, tied: one phrase ("mirrored with 1 MB
  // buckets, one bucket").
  if (!tiedCaps.empty()) {
    for (std::string &name : tiedCaps)
      name = llvm::StringRef(name).split(", ").second.str();
    tied.push_back(modeName(ParamPlacement{ParamPlacement::Mirrored}) + " with " +
                   llvm::join(tiedCaps, ", "));
  }
  if (!tied.empty())
    text += ", tied with " + llvm::join(tied, "; ") +
            " (within 2%); it needs the least memory on its fullest GPU (" +
            mib(chosen.fullestGpuBytes) +
            (chosen.fullestGpu.empty() ? "" : " on " + chosen.fullestGpu) + ")";
  if (!slower.empty())
    text += "; slower: " + llvm::join(slower, ", ");
  if (!unusable.empty())
    text += "; " + llvm::join(unusable, ", ");
  return text;
}

llvm::json::Array candidatesJson(const std::vector<Candidate> &all) {
  llvm::json::Array rows;
  for (const Candidate &c : all)
    rows.push_back(llvm::json::Object{{"mode", nameOf(c)},
                                      {"refused", c.refused},
                                      {"unfit", c.unfit},
                                      {"step_seconds", c.step},
                                      {"bottleneck", c.bottleneck},
                                      {"traffic_bytes", c.traffic},
                                      {"fullest_gpu", c.fullestGpu},
                                      {"fullest_gpu_bytes", c.fullestGpuBytes}});
  return rows;
}

/// "mirrored, 4 MB buckets" -> "mirrored-4-MB-buckets": a candidate's
/// directory of dumps under --dump-dir.
std::string dumpDirOf(const DumpOptions &dump, const Candidate &c) {
  if (dump.dumpDir.empty())
    return "";
  std::string name;
  for (char ch : nameOf(c))
    if (llvm::isAlnum(ch))
      name += ch;
    else if (!name.empty() && name.back() != '-')
      name += '-';
  llvm::SmallString<256> dir(dump.dumpDir);
  llvm::sys::path::append(dir, name);
  return dir.str().str();
}

/// The candidates for a cluster: cpu, the largest GPU, and with two towers
/// or more (or several workers) spread and mirrored at each bucket cap.
std::vector<Candidate> candidatesFor(const Cluster &cluster, const CompileRequest &req,
                                     const PlacementRequest &place) {
  std::vector<Candidate> all{{ParamPlacement{ParamPlacement::Cpu}}, {largestGpu(cluster)}};
  unsigned towers = (unsigned)place.towers.value_or((int)cluster.numGpus());
  if (towers >= 2 || place.workers > 1 || place.tasks) {
    const ParamPlacement mirrored{ParamPlacement::Mirrored};
    all.push_back({ParamPlacement{ParamPlacement::Spread}});
    all.push_back({mirrored, req.options.bucketBytes});
    if (place.searchBuckets)
      for (int64_t cap : kBucketCaps)
        if (cap != req.options.bucketBytes)
          all.push_back({mirrored, cap});
  }
  return all;
}

/// The usable candidate to choose, or an error that lists why none is: a
/// MemoryMisfit with the figures of the mode that came closest when any
/// compiled, each other mode's fullest device (or refusal) after them.
llvm::Expected<size_t> choose(const std::vector<Candidate> &all) {
  std::optional<size_t> best, closest;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].usable() && (!best || better(all[i], all[*best])))
      best = i;
    if (!all[i].needs.empty() &&
        (!closest || shortfall(all[i].needs) < shortfall(all[*closest].needs)))
      closest = i;
  }
  if (best)
    return *best;
  std::vector<std::string> each;
  for (size_t i = 0; i < all.size(); ++i) {
    const Candidate &c = all[i];
    if (closest && i == *closest)
      continue;
    if (!c.refused.empty() || !closest) {
      each.push_back(nameOf(c) + ": " + (c.refused.empty() ? c.unfit : c.refused));
      continue;
    }
    each.push_back(nameOf(c) + ": " + mostShort(c.needs)->brief());
  }
  if (!closest)
    return makeError("--params auto: no parameter mode fits this cluster (" +
                     llvm::join(each, "; ") + ")");
  return llvm::make_error<MemoryMisfit>("--params auto: no parameter mode fits this cluster; the "
                                        "closest, " +
                                            nameOf(all[*closest]),
                                        all[*closest].needs,
                                        "the other modes: " + llvm::join(each, "; "));
}

} // namespace

llvm::Expected<std::unique_ptr<Module>>
ParamsAutoStrategy::compile(const Module &forward, const CompileRequest &req,
                            const PlacementRequest &place) const {
  auto cluster = clusterFor(place);
  if (!cluster)
    return withContext(cluster.takeError(), "--params auto");
  std::vector<Candidate> all = candidatesFor(*cluster, req, place);
  // Each candidate is the plan of the strategy --params auto stands in for.
  std::unique_ptr<CompileStrategy> each;
  if (place.psTasks() > 0)
    each = std::make_unique<ParameterServerStrategy>();
  else
    each = std::make_unique<DataParallelStrategy>();
  std::vector<std::unique_ptr<Module>> plans(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    CompileRequest one = req;
    one.dump.dumpDir = dumpDirOf(req.dump, all[i]); // each candidate's passes apart
    one.options.params = all[i].mode;
    if (all[i].bucketBytes)
      one.options.bucketBytes = all[i].bucketBytes;
    auto plan = each->compile(forward, one, place);
    if (!plan) {
      all[i].refused = llvm::toString(plan.takeError());
      continue;
    }
    if (auto e = measure(**plan, all[i]))
      return withContext(std::move(e), "--params auto, " + nameOf(all[i]));
    plans[i] = std::move(*plan);
  }
  auto best = choose(all);
  if (!best)
    return best.takeError();
  std::unique_ptr<Module> chosen = std::move(plans[*best]);
  chosen->plan().paramsWhy = why(all, all[*best]);
  chosen->plan().paramsChosen = nameOf(all[*best]);
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::json::Value(candidatesJson(all));
  chosen->plan().paramsAuto = os.str();
  return chosen;
}

std::string describeParamsChoice(const Module &plan, bool table) {
  std::string text = plan.plan().paramsWhy.value_or("");
  if (text.empty() || !table)
    return text;
  std::string chosen = plan.plan().paramsChosen.value_or("");
  auto rows = llvm::json::parse(plan.plan().paramsAuto.value_or(""));
  if (!rows || !rows->getAsArray()) {
    llvm::consumeError(rows.takeError());
    return text;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  os << text << "\n";
  os << llvm::formatv("  {0,-27} {1,14} {2,-26} {3,13} {4,-22} {5}\n", "mode", "predicted step",
                      "bottleneck", "traffic/step", "fullest GPU", "note");
  for (const llvm::json::Value &v : *rows->getAsArray()) {
    const llvm::json::Object *o = v.getAsObject();
    if (!o)
      continue;
    auto str = [&](llvm::StringRef k) { return o->getString(k).getValueOr("").str(); };
    bool compiled = str("refused").empty();
    std::string note = !compiled               ? "not possible: " + str("refused")
                       : !str("unfit").empty() ? "does not fit: " + str("unfit")
                       : str("mode") == chosen ? "chosen"
                                               : "";
    std::string fullest =
        compiled && !str("fullest_gpu").empty()
            ? mib(o->getInteger("fullest_gpu_bytes").getValueOr(0)) + " on " + str("fullest_gpu")
            : "-";
    std::string row = llvm::formatv(
        "  {0,-27} {1,14} {2,-26} {3,13} {4,-22} {5}", str("mode"),
        compiled ? ms(o->getNumber("step_seconds").getValueOr(0)) : "-",
        compiled ? str("bottleneck") : "-",
        compiled ? mib(o->getInteger("traffic_bytes").getValueOr(0)) : "-", fullest, note);
    os << llvm::StringRef(row).rtrim() << "\n";
  }
  return os.str();
}

} // namespace graphc
