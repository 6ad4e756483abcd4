#include "passes/strategy/DataParallelStrategy.h"

#include "ir/Clone.h"
#include "ir/Diagnostics.h"
#include "passes/TowerReplication.h"
#include "passes/strategy/Compile.h"
#include "passes/strategy/RecomputeMeasures.h"
#include "placement/Placer.h"

#include "llvm/ADT/StringExtras.h"

#include <cstdio>
#include <numeric>

namespace graphc {

namespace {

std::string joined(llvm::ArrayRef<unsigned> v) {
  return llvm::join(llvm::map_range(v, [](unsigned n) { return std::to_string(n); }), ", ");
}

/// A plan for several workers (or from a cluster of tasks) records its
/// workers, their towers and its tasks; one worker without tasks, nothing.
void recordWorkers(PlanInfo &plan, const PlacementRequest &place,
                   llvm::ArrayRef<unsigned> towersPerWorker) {
  if (towersPerWorker.size() > 1) {
    plan.workers = (int64_t)towersPerWorker.size();
    plan.workerTowers = Ints(towersPerWorker.begin(), towersPerWorker.end());
  }
  if (place.tasks)
    plan.tasks = *place.tasks;
}

/// The pipelines of a data-parallel compile: training, `placement` (none on
/// the host) and --recompute's, then `after`.
std::vector<llvm::StringRef> pipelinesOf(const CompileRequest &req, llvm::StringRef placement,
                                         llvm::ArrayRef<llvm::StringRef> after) {
  std::vector<llvm::StringRef> all{trainingPipeline(req)};
  if (!placement.empty()) {
    all.push_back(placement);
    llvm::append_range(all, recomputePipelines(req.options));
  }
  all.insert(all.end(), after.begin(), after.end());
  return all;
}

/// The host's plan: one host tower per worker when there are several.
llvm::Expected<std::unique_ptr<Module>> compileOnHost(const Module &forward, CompileRequest req,
                                                      const PlacementRequest &place,
                                                      llvm::ArrayRef<llvm::StringRef> after) {
  const unsigned workers = (unsigned)place.workerGpus().size();
  if (workers > 1)
    req.options.towers = (int)workers;
  std::unique_ptr<Module> m = cloneModule(forward);
  recordWorkers(m->plan(), place, std::vector<unsigned>(workers, 1));
  if (auto e = runPipelines(*m, req.options, req.dump, pipelinesOf(req, "", after)))
    return e;
  keepForwardGraph(forward, *m);
  return m;
}

/// The towers of a placed plan on `gpus` GPUs: one per GPU of every worker,
/// or --towers for one worker.
llvm::Expected<int> placedTowers(const PlacementRequest &place, llvm::ArrayRef<unsigned> workerGpus,
                                 int gpus) {
  const size_t workers = workerGpus.size();
  if (workers > 1 && place.towers &&
      llvm::any_of(workerGpus, [&](unsigned g) { return (int)g != *place.towers; }))
    return makeError("--towers " + llvm::Twine(*place.towers) + " with " + llvm::Twine(workers) +
                     " workers: a multi-worker plan has one tower per GPU (" + joined(workerGpus) +
                     " per worker)");
  int towers = workers > 1 ? gpus : place.towers.value_or(gpus);
  if (towers < 0 || towers > gpus)
    return makeError("--towers " + llvm::Twine(towers) + " does not fit the cluster: it has " +
                     llvm::Twine(gpus) + " GPU" + (gpus == 1 ? "" : "s") +
                     " (one tower per GPU at most; 0: the single-device graph)");
  return towers;
}

/// The cluster of every worker's GPUs together (numbered in rank order).
llvm::Expected<Cluster> wholeCluster(const PlacementRequest &place,
                                     llvm::ArrayRef<unsigned> workerGpus) {
  const bool several = workerGpus.size() > 1 || place.tasks;
  if (several && (!place.clusterFile.empty() || place.cluster))
    return makeError("--cluster with several workers or --tasks is not supported (a cluster file "
                     "describes one process's devices): give each worker's GPUs with --gpus or "
                     "--tasks");
  PlacementRequest whole = place;
  if (several)
    whole.gpus = (int)std::accumulate(workerGpus.begin(), workerGpus.end(), 0u);
  auto cluster = clusterFor(whole);
  if (cluster && cluster->numGpus() == 0)
    return makeError("the cluster has no GPU to place towers on");
  return cluster;
}

/// --split auto: the towers' shares by their devices' speeds, recorded with
/// the speeds; --split weights recorded as given.
llvm::Error splitBatch(const Cluster &cluster, int towers, SplitSpec &split, PlanInfo &plan) {
  if (split.kind == SplitSpec::Auto) {
    auto speeds = cluster.towerSpeeds((unsigned)towers);
    if (!speeds)
      return speeds.takeError();
    split = towers ? SplitSpec{SplitSpec::Weights, *speeds} : SplitSpec();
    if (!speeds->empty()) {
      plan.split = SplitSpec{SplitSpec::Auto, {}};
      plan.splitSpeeds = Floats(speeds->begin(), speeds->end());
      return llvm::Error::success();
    }
  }
  if (split.kind == SplitSpec::Weights)
    plan.split = split;
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Module>> compilePlaced(const Module &forward, CompileRequest req,
                                                      const PlacementRequest &place,
                                                      llvm::ArrayRef<llvm::StringRef> after) {
  const std::vector<unsigned> workerGpus = place.workerGpus();
  auto cluster = wholeCluster(place, workerGpus);
  if (!cluster)
    return cluster.takeError();
  auto towers = placedTowers(place, workerGpus, (int)cluster->numGpus());
  if (!towers)
    return towers.takeError();
  req.options.towers = *towers;
  req.options.fuseBatchNormReluGradients = true; // wholeCluster: it has GPUs
  std::unique_ptr<Module> m = cloneModule(forward);
  PlanInfo &plan = m->plan();
  plan.cluster = *cluster;
  plan.params = req.options.params;
  if (auto e = splitBatch(*cluster, *towers, req.options.split, plan))
    return e;
  recordWorkers(plan, place, workerGpus);
  if (req.options.batch <= 0 && !forward.batch())
    req.options.batch = kDefaultBatch;
  PlacerOptions po;
  po.softPlacement = place.softPlacement;
  req.options.placer = makePlacerFunction(*cluster, kernelFor, po);
  setRecomputeMeasures(req.options, *cluster);
  if (auto e = runPipelines(*m, req.options, req.dump, pipelinesOf(req, kPlacementPipeline, after)))
    return e;
  keepForwardGraph(forward, *m);
  return m;
}

/// 67e12 -> "67", 33.5e12 -> "33.5" (TFLOP/s).
std::string teraflops(double flops) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", flops / 1e12);
  return text;
}

} // namespace

llvm::Expected<std::unique_ptr<Module>> compileDataParallel(const Module &forward,
                                                            CompileRequest req,
                                                            const PlacementRequest &place,
                                                            llvm::ArrayRef<llvm::StringRef> after) {
  if (place.onHost())
    return compileOnHost(forward, std::move(req), place, after);
  return compilePlaced(forward, std::move(req), place, after);
}

llvm::Expected<std::unique_ptr<Module>>
DataParallelStrategy::compile(const Module &forward, const CompileRequest &req,
                              const PlacementRequest &place) const {
  return compileDataParallel(forward, req, place, {});
}

std::string describeSplit(const Module &plan) {
  Ints batches = plan.plan().towerBatches.value_or(Ints{});
  const std::optional<SplitSpec> &split = plan.plan().split;
  if (batches.size() < 2 || !split)
    return "";
  std::string text =
      "tower batches " +
      llvm::join(llvm::map_range(batches, [](int64_t b) { return std::to_string(b); }), ", ");
  if (split->kind != SplitSpec::Auto)
    return text + " (--split " + modeName(*split) + ")";
  Floats speeds = plan.plan().splitSpeeds.value_or(Floats{});
  std::vector<std::string> each;
  for (size_t t = 0; t < speeds.size(); ++t)
    each.push_back(towerDevice((int)t).str() + " " + teraflops(speeds[t]));
  return text + " (--split auto: in proportion to the speeds of the towers' devices, " +
         llvm::join(each, ", ") + " TFLOP/s, so that they finish their towers together)";
}

} // namespace graphc
