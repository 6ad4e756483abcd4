#include "tools/driver/ScalingTable.h"

#include "ir/Diagnostics.h"

#include "llvm/Support/Format.h"

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
      if (!scaling.clusterFile.empty()) {
        place.clusterFile = scaling.clusterFile;
        place.towers = (int)row.perWorker;
      }
      auto compiled = compilePlaced(forward, one, place);
      if (!compiled)
        return withContext(compiled.takeError(), llvm::Twine(row.perWorker) + " GPUs");
      plan = runnablePart(**compiled);
      plan->plan().cluster = (*compiled)->plan().cluster;
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

void printScalingTable(llvm::ArrayRef<ScalingRow> rows, const ScalingRequest &scaling,
                       llvm::raw_ostream &os) {
  os << "     GPUs  workers  step ms  all-reduce on path ms    images/s  speed-up  efficiency\n";
  for (const ScalingRow &r : rows)
    os << llvm::format("  %7u %8u %8.2f %22.2f %11.0f %9.1f %10.1f%%\n", r.gpus, r.workers,
                       r.stepSeconds * 1e3, r.allReduceOnPath * 1e3, r.imagesPerSecond, r.speedup,
                       r.efficiency * 100);
  os << llvm::format("  weak scaling, %lld images per GPU; workers of %u GPUs, network %.0f Gb/s "
                     "per worker, %.0f us latency; ",
                     (long long)scaling.batchPerGpu, scaling.workersOf,
                     scaling.sim.networkBandwidth * 8 / 1e9,
                     scaling.sim.networkLatencySeconds * 1e6)
     << (scaling.clusterFile.empty() ? std::string("default (H100-like) worker")
                                     : "each worker " + scaling.clusterFile)
     << "\n";
  os << "published, Inception v3 on other hardware (for orientation):\n"
        "  TensorFlow benchmarks (May 2017), DGX-1 with 8 P100s, synthetic data: 7.99x at 8 "
        "GPUs (99%)\n"
        "  Horovod (Sergeev and Del Balso, arXiv:1802.05799): 88% efficiency at 128 Pascal GPUs "
        "over 25 GbE (standard distributed TensorFlow: about 50%)\n";
}

} // namespace graphc
