#include "tools/driver/Inspect.h"

#include "ir/Clone.h"
#include "ir/Diagnostics.h"
#include "passes/PsPart.h"
#include "passes/WorkerPart.h"
#include "passes/strategy/CompiledModule.h"
#include "placement/CostReport.h"
#include "placement/analysis/CostModel.h"
#include "placement/analysis/MemoryNeeds.h"
#include "placement/analysis/StepTimeModel.h"
#include "tools/driver/RecomputeReport.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <set>

namespace graphc {

namespace {

/// What one worker of a multi-worker plan runs, and what it costs.
struct WorkerReport {
  unsigned rank = 0;
  std::string task; ///< "chief on node0", or "worker 1" without tasks
  int64_t towers = 0;
  WorkerSlice samples;
  Cluster cluster;
  PlacementCost cost;
  llvm::StringMap<int64_t> peak;
  /// Sent (and received) across workers per step: a ring all-reduce of
  /// every group marked `workers`, once per worker after the sum inside it.
  int64_t betweenBytes = 0;
  unsigned betweenGroups = 0;
  /// With ps tasks: the sums sent to them per step (and the variables
  /// received, as many bytes).
  int64_t psBytes = 0;
};

/// The devices one worker sees: the host and its GPUs, renumbered from gpu:0
/// as selectWorkerPart renumbers them.
llvm::Expected<Cluster> workerCluster(const Cluster &whole, unsigned firstGpu, unsigned gpus) {
  auto rename = [&](DeviceId id) -> std::optional<std::string> {
    if (id.isHost())
      return id.str();
    if (id.isGpu() && id.index >= firstGpu && id.index < firstGpu + gpus)
      return DeviceId::gpu(id.index - firstGpu).str();
    return std::nullopt;
  };
  std::vector<ClusterDevice> devices;
  for (const ClusterDevice &d : whole.devices())
    if (auto name = rename(d.id)) {
      devices.push_back(d);
      devices.back().name = *name;
    }
  std::vector<Link> links;
  for (const Link &l : whole.links()) {
    auto a = rename(whole.find(l.a)->id), b = rename(whole.find(l.b)->id);
    if (a && b)
      links.push_back({*a, *b, l.bandwidth});
  }
  return Cluster::create(std::move(devices), std::move(links), whole.kindPeakFlops(DeviceKind::CPU),
                         whole.kindPeakFlops(DeviceKind::GPU));
}

llvm::Expected<std::vector<WorkerReport>> reportWorkers(const Module &plan, const Cluster &whole) {
  const unsigned workers = planWorkers(plan);
  const std::optional<TaskCluster> &tasks = plan.plan().tasks;
  Ints towers = plan.plan().workerTowers.value_or(Ints{});
  if (towers.empty())
    towers.assign(workers, plan.plan().towers.value_or(0) / workers);
  std::vector<WorkerReport> reports;
  unsigned firstGpu = 0;
  for (unsigned w = 0; w < workers; ++w) {
    WorkerReport r;
    r.rank = w;
    r.task = tasks    ? tasks->describe(w)
             : w == 0 ? "worker 0 (the chief)"
                      : "worker " + std::to_string(w);
    r.towers = towers[w];
    auto slice = workerSlice(plan, w);
    if (!slice)
      return slice.takeError();
    r.samples = *slice;
    std::unique_ptr<Module> part = cloneModule(plan);
    if (auto e = selectWorkerPart(*part, w))
      return e;
    if (planPsTasks(plan) > 0) {
      auto routes = selectPsWorkerPart(*part);
      if (!routes)
        return routes.takeError();
      for (const PsRoute &route : *routes)
        r.psBytes += route.type.bytes();
    }
    auto cluster = workerCluster(whole, firstGpu, (unsigned)r.towers);
    if (!cluster)
      return cluster.takeError();
    firstGpu += (unsigned)r.towers;
    r.cluster = std::move(*cluster);
    auto cost = estimatePlacementCost(*part, r.cluster);
    if (!cost)
      return cost.takeError();
    r.cost = std::move(*cost);
    auto peak = plannedArenaBytes(*part);
    if (!peak)
      return peak.takeError();
    r.peak = std::move(*peak);
    std::set<std::string> groups;
    for (const Node *n : part->main().nodes())
      if (n->op() == Op::AllReduce && n->attrs().has("workers") &&
          groups.insert(n->attrs().getString("group")).second) {
        int64_t bytes = 0;
        for (const Value *v : n->operands())
          bytes += v->type().bytes(r.samples.count);
        r.betweenBytes += StepTimeModel::ringBytes(bytes, workers);
      }
    r.betweenGroups = (unsigned)groups.size();
    reports.push_back(std::move(r));
  }
  return reports;
}

PeakActivationBytes peakFrom(const llvm::StringMap<int64_t> &peak) {
  return [&peak](llvm::StringRef device) -> std::optional<int64_t> {
    auto it = peak.find(device);
    if (it == peak.end())
      return std::nullopt;
    return it->second;
  };
}

std::string mibText(int64_t bytes) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f", bytes / double(1 << 20));
  return buf;
}

/// What one ps task holds.
struct PsReport {
  unsigned rank = 0;
  std::string task;
  std::vector<const PsRoute *> variables;
  int64_t bytes = 0;         ///< variables and slots
  int64_t exchangeBytes = 0; ///< from each worker per step (and as much back)
};

std::vector<PsReport> reportPsTasks(const Module &plan, const PsShards &shards) {
  const std::optional<TaskCluster> &tasks = plan.plan().tasks;
  const unsigned workers = planWorkers(plan);
  std::vector<PsReport> reports(shards.tasks);
  for (unsigned p = 0; p < shards.tasks; ++p) {
    reports[p].rank = workers + p;
    reports[p].task = tasks && workers + p < tasks->tasks().size() ? tasks->describe(workers + p)
                                                                   : "ps task " + std::to_string(p);
    reports[p].bytes = shards.taskBytes[p];
  }
  for (const PsRoute &r : shards.variables) {
    reports[r.task].variables.push_back(&r);
    reports[r.task].exchangeBytes += r.type.bytes();
  }
  return reports;
}

void printPsReport(const Module &plan, llvm::ArrayRef<PsReport> tasks, llvm::raw_ostream &os) {
  os << "\nps tasks, " << (planPsAsync(plan) ? "asynchronous" : "synchronous")
     << " (each worker sends its sums of a task's variables every step and receives the "
        "variables):\n";
  std::vector<std::vector<std::string>> rows{
      {"rank", "task", "variables", "var+slot MiB", "per worker MiB"}};
  for (const PsReport &t : tasks)
    rows.push_back({std::to_string(t.rank), t.task, std::to_string(t.variables.size()),
                    mibText(t.bytes), mibText(t.exchangeBytes)});
  printTable(rows, os, /*leftColumns=*/2);
  for (const PsReport &t : tasks) {
    os << t.task << " holds:";
    const char *sep = " ";
    for (const PsRoute *r : t.variables) {
      os << sep << r->var;
      if (!r->slots.empty())
        os << " (+" << llvm::join(r->slots, ", ") << ")";
      sep = ", ";
    }
    os << "\n";
  }
}

llvm::json::Value psReportJson(const Module &plan, llvm::ArrayRef<PsReport> tasks) {
  llvm::json::Array list;
  for (const PsReport &t : tasks) {
    llvm::json::Array vars;
    for (const PsRoute *r : t.variables)
      vars.push_back(llvm::json::Object{
          {"name", r->var}, {"bytes", r->type.bytes()}, {"slots", llvm::json::Array(r->slots)}});
    list.push_back(llvm::json::Object{{"rank", (int64_t)t.rank},
                                      {"task", t.task},
                                      {"bytes", t.bytes},
                                      {"per_worker_bytes", t.exchangeBytes},
                                      {"variables", std::move(vars)}});
  }
  return list;
}

void printWorkersReport(const Module &plan, llvm::ArrayRef<WorkerReport> workers,
                        llvm::raw_ostream &os) {
  const unsigned ps = planPsTasks(plan);
  os << "plan for " << workers.size() << " worker" << (workers.size() == 1 ? "" : "s");
  if (ps)
    os << " and " << ps << " ps task" << (ps == 1 ? "" : "s");
  os << " (mpirun -np " << workers.size() + ps << "), " << plan.plan().towers.value_or(0)
     << " towers, global batch " << plan.batch().value_or(0)
     << "\n\nper worker, per step (between workers" << (ps ? " and to the ps tasks" : "")
     << ": sent, and as much received):\n";
  std::vector<std::vector<std::string>> rows{{"rank", "task", "towers", "samples", "GFLOP",
                                              "var MiB", "peak act MiB", "inside MiB",
                                              "between MiB"}};
  if (ps)
    rows[0].push_back("to ps MiB");
  for (const WorkerReport &w : workers) {
    int64_t flops = 0, vars = 0, peak = 0, inside = 0;
    for (const DeviceCost &d : w.cost.devices) {
      flops += d.flops;
      vars += d.variableBytes;
      peak += w.peak.lookup(d.device);
    }
    inside = w.cost.totalTrafficBytes();
    char gflop[32];
    snprintf(gflop, sizeof(gflop), "%.2f", flops / 1e9);
    rows.push_back({std::to_string(w.rank), w.task, std::to_string(w.towers),
                    std::to_string(w.samples.offset) + ".." +
                        std::to_string(w.samples.offset + w.samples.count - 1),
                    gflop, mibText(vars), mibText(peak), mibText(inside), mibText(w.betweenBytes)});
    if (ps)
      rows.back().push_back(mibText(w.psBytes));
  }
  printTable(rows, os, /*leftColumns=*/2);
  for (const WorkerReport &w : workers) {
    os << "\nrank " << w.rank << ": " << w.task << ", the part of the plan it runs:\n";
    printCostReport(w.cost, w.cluster, os, peakFrom(w.peak));
    os << "between workers: " << mibText(w.betweenBytes) << " MiB sent and received per step ("
       << w.betweenGroups << " sums across " << workers.size()
       << " workers, ring all-reduce: 2(W-1)/W of each; the network's time is not modelled)\n";
  }
}

llvm::json::Value workersReportJson(const Module &plan, llvm::ArrayRef<WorkerReport> workers) {
  llvm::json::Array list;
  for (const WorkerReport &w : workers)
    list.push_back(
        llvm::json::Object{{"rank", (int64_t)w.rank},
                           {"task", w.task},
                           {"towers", w.towers},
                           {"sample_offset", w.samples.offset},
                           {"samples", w.samples.count},
                           {"between_workers_bytes", w.betweenBytes},
                           {"between_workers_sums", (int64_t)w.betweenGroups},
                           {"inside_bytes", w.cost.totalTrafficBytes()},
                           {"to_ps_bytes", w.psBytes},
                           {"cost", costReportJson(w.cost, w.cluster, peakFrom(w.peak))}});
  return llvm::json::Object{{"workers", std::move(list)},
                            {"towers", plan.plan().towers.value_or(0)},
                            {"global_batch", plan.batch().value_or(0)}};
}

} // namespace

llvm::Error printPlacedReport(const Module &placed, llvm::raw_ostream &os, bool json) {
  if (!placed.plan().cluster)
    return makeError("module '" + placed.name() +
                     "' does not record its cluster; place it with graphc place");
  const Cluster *cluster = &*placed.plan().cluster;
  // Several workers: each as its rank runs it, on its own host and GPUs;
  // then the ps tasks and what each holds.
  if (planWorkers(placed) > 1 || planPsTasks(placed) > 0) {
    auto workers = reportWorkers(placed, *cluster);
    if (!workers)
      return workers.takeError();
    std::vector<PsReport> ps;
    if (planPsTasks(placed) > 0) {
      auto shards = psShards(placed);
      if (!shards)
        return shards.takeError();
      ps = reportPsTasks(placed, *shards);
      if (json) {
        llvm::json::Value report = workersReportJson(placed, *workers);
        report.getAsObject()->try_emplace("ps_tasks", psReportJson(placed, ps));
        report.getAsObject()->try_emplace("ps_async", planPsAsync(placed));
        os << report << "\n";
      } else {
        printWorkersReport(placed, *workers, os);
        printPsReport(placed, ps, os);
      }
      return llvm::Error::success();
    }
    if (json)
      os << workersReportJson(placed, *workers) << "\n";
    else
      printWorkersReport(placed, *workers, os);
    return llvm::Error::success();
  }
  auto cost = estimatePlacementCost(placed, *cluster);
  if (!cost)
    return cost.takeError();
  auto peaks = plannedArenaBytes(placed);
  if (!peaks)
    return peaks.takeError();
  const llvm::StringMap<int64_t> &peak = *peaks;
  PeakActivationBytes peakOf = [&](llvm::StringRef device) -> std::optional<int64_t> {
    auto it = peak.find(device);
    if (it == peak.end())
      return std::nullopt;
    return it->second;
  };
  if (json) {
    llvm::json::Value report = costReportJson(*cost, *cluster, peakOf);
    if (auto recompute = recomputeReportJson(placed); recompute && report.getAsObject())
      report.getAsObject()->try_emplace("recompute", std::move(*recompute));
    os << report << "\n";
  } else {
    printCostReport(*cost, *cluster, os, peakOf);
    printRecomputeReport(placed, os);
  }
  if (std::string sharded = describeShardedSlots(placed); !json && !sharded.empty())
    os << sharded << "\n";
  return llvm::Error::success();
}

} // namespace graphc
