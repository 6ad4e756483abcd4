#include "passes/strategy/ScalingTable.h"

#include "ir/Diagnostics.h"
#include "passes/strategy/CompilePlan.h"

#include <map>

namespace graphc {

llvm::Expected<std::vector<ScalingRow>>
scalingTable(const Module &forward, const CompileRequest &req, const ScalingRequest &scaling) {
  std::map<unsigned, std::unique_ptr<Module>> plans; // per GPUs of one worker
  std::vector<ScalingRow> rows;
  for (unsigned n : scaling.gpus) {
    if (n == 0)
      return makeError("--gpus: a GPU count must be at least 1");
    ScalingRow row;
    row.gpus = n;
    row.perWorker = std::min(n, scaling.workersOf);
    if (n > scaling.workersOf && (scaling.workersOf < 2 || n % scaling.workersOf != 0))
      return makeError("--gpus " + llvm::Twine(n) + " with --workers-of " +
                       llvm::Twine(scaling.workersOf) +
                       ": above one worker, the GPU count must be a multiple of the GPUs per "
                       "worker, which must be at least 2");
    row.workers = n / row.perWorker;
    std::unique_ptr<Module> &plan = plans[row.perWorker];
    if (!plan) {
      CompileRequest one = req;
      one.options.batch = scaling.batchPerGpu * row.perWorker;
      PlacementRequest place;
      place.gpus = (int)row.perWorker;
      place.calibratedFile = scaling.calibratedFile;
      if (!scaling.clusterFile.empty()) {
        place.clusterFile = scaling.clusterFile;
        place.towers = (int)row.perWorker;
      }
      auto compiled = compilePlan(forward, one, place);
      if (!compiled)
        return withContext(compiled.takeError(), llvm::Twine(row.perWorker) + " GPUs");
      plan = std::move(*compiled);
    }
    if (!plan->plan().cluster)
      return makeError("module '" + plan->name() + "' does not record its cluster");
    const Cluster *cluster = &*plan->plan().cluster;
    SimOptions sim = scaling.sim;
    sim.workers = row.workers;
    auto r = simulateStep(*plan, *cluster, sim);
    if (!r)
      return r.takeError();
    row.stepSeconds = r->stepSeconds;
    row.imagesPerSecond = (double)scaling.batchPerGpu * n / r->stepSeconds;
    for (const SimStep &s : r->criticalPath)
      if (s.kind == "all-reduce")
        row.allReduceOnPath += s.end - s.start;
    rows.push_back(row);
  }
  // Speed-up over one GPU: the row with 1 GPU, or the smallest count's per-GPU rate.
  const ScalingRow *base = rows.empty() ? nullptr : &rows.front();
  for (const ScalingRow &r : rows)
    if (r.gpus < base->gpus)
      base = &r;
  for (ScalingRow &r : rows) {
    double perGpu = base->imagesPerSecond / base->gpus;
    r.speedup = r.imagesPerSecond / perGpu;
    r.efficiency = r.speedup / r.gpus;
  }
  return rows;
}

} // namespace graphc
