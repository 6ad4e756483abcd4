#include "tools/driver/Compile.h"

#include "ir/Clone.h"
#include "ir/Diagnostics.h"
#include "ir/ShapeInference.h"
#include "ir/Verifier.h"
#include "kernels/Kernel.h"
#include "passes/InferenceFusion.h"
#include "passes/LossScaling.h"
#include "passes/PsPart.h"
#include "passes/TowerReplication.h"
#include "placement/DotView.h"
#include "placement/Placer.h"
#include "tools/driver/CompileModelParallel.h"
#include "tools/driver/ParamsAuto.h"

#include "llvm/ADT/StringExtras.h"

#include <cstdio>
#include <numeric>

namespace graphc {

static void keepForwardGraph(const Module &forward, Module &compiled) {
  Graph &g = compiled.addGraph("forward");
  g.setOutputs(cloneGraphInto(*forward.findGraph("main"), g));
}

llvm::Expected<std::unique_ptr<Module>> compileTraining(const Module &forward,
                                                        const CompileRequest &req) {
  std::unique_ptr<Module> m = cloneModule(forward);
  PassManager pm(req.options, req.dump);
  pm.setDotWriter(writeDot);
  if (auto e = pm.addPipeline(req.pipeline.empty() ? kDefaultTrainingPipeline : req.pipeline))
    return e;
  if (auto e = pm.run(*m))
    return e;
  keepForwardGraph(forward, *m);
  return m;
}

llvm::Error parseTowerModes(const TowerModeFlags &flags, CompileOptions &into) {
  auto params = parseParamPlacement(flags.params);
  if (!params)
    return withContext(params.takeError(), "--params");
  auto bn = parseBnMode(flags.bn);
  if (!bn)
    return withContext(bn.takeError(), "--bn");
  auto remainder = parseRemainderPolicy(flags.remainder);
  if (!remainder)
    return withContext(remainder.takeError(), "--remainder");
  auto precision = parsePrecision(flags.precision);
  if (!precision)
    return withContext(precision.takeError(), "--precision");
  into.precision = *precision;
  into.lossScale = *precision == Precision::FP16 ? kDefaultFp16LossScale : 0;
  if (!flags.lossScale.empty()) {
    auto scale = parseLossScale(flags.lossScale);
    if (!scale)
      return scale.takeError(); // its message names --loss-scale
    into.lossScale = *scale;
  }
  int64_t interval = 0;
  if (llvm::StringRef(flags.lossScaleInterval).trim().getAsInteger(10, interval) || interval < 1)
    return makeError("--loss-scale-interval " + flags.lossScaleInterval +
                     ": must be a whole number of steps, at least 1");
  into.lossScaleInterval = interval;
  into.params = *params;
  into.bn = *bn;
  into.remainder = *remainder;
  into.split = SplitSpec();
  if (!flags.split.empty()) {
    auto split = parseSplitSpec(flags.split);
    if (!split)
      return split.takeError(); // its message names --split
    into.split = std::move(*split);
  }
  return llvm::Error::success();
}

llvm::Expected<Cluster> clusterFor(const PlacementRequest &place) {
  if (!place.clusterFile.empty())
    return loadClusterFile(place.clusterFile);
  if (place.gpus <= 0)
    return makeError("--gpus must be at least 1");
  if ((unsigned)place.gpus >= Cluster::kMaxDevices)
    return makeError("--gpus " + llvm::Twine(place.gpus) +
                     " is more than graphc places on: at most " +
                     llvm::Twine(Cluster::kMaxDevices - 1) + " GPUs (" +
                     llvm::Twine(Cluster::kMaxDevices) + " devices with the host)");
  return Cluster::defaultCluster(place.gpus);
}

/// Whether a node has a kernel for a device kind. A build without a GPU
/// backend registers no GPU kernels; it plans as a GPU build would, taking the
/// CPU kernels as the measure of what exists.
bool kernelFor(const Node &n, DeviceKind kind) {
  static const bool haveGpuKernels =
      KernelRegistry::global().find(Op::Conv, DeviceKind::GPU, DType::F32) != nullptr;
  return KernelRegistry::global().supports(n, haveGpuKernels ? kind : DeviceKind::CPU);
}

std::vector<unsigned> PlacementRequest::workerGpus() const {
  if (tasks)
    return tasks->workerGpus();
  return std::vector<unsigned>((size_t)std::max(1, workers), (unsigned)std::max(0, gpus));
}

void recordWorkers(Module &plan, const PlacementRequest &place,
                   llvm::ArrayRef<unsigned> towersPerWorker) {
  if (towersPerWorker.size() > 1) {
    plan.plan().workers = (int64_t)towersPerWorker.size();
    plan.plan().workerTowers = Ints(towersPerWorker.begin(), towersPerWorker.end());
  }
  if (place.tasks)
    plan.plan().tasks = *place.tasks;
}

static std::string joined(llvm::ArrayRef<unsigned> v) {
  return llvm::join(llvm::map_range(v, [](unsigned n) { return std::to_string(n); }), ", ");
}

llvm::Expected<std::unique_ptr<Module>> compilePlaced(const Module &forward, CompileRequest req,
                                                      const PlacementRequest &place) {
  if (place.strategy == Strategy::ModelParallel)
    return compileModelParallel(forward, std::move(req), place);
  if (req.options.params.kind == ParamPlacement::Auto)
    return compileParamsAuto(forward, req, place);
  // One tower per GPU of every worker, in rank order.
  const std::vector<unsigned> workerGpus = place.workerGpus();
  const unsigned workers = (unsigned)workerGpus.size();
  if ((workers > 1 || place.tasks) && !place.clusterFile.empty())
    return makeError("--cluster with several workers or --tasks is not supported (a cluster file "
                     "describes one process's devices): give each worker's GPUs with --gpus or "
                     "--tasks");
  PlacementRequest whole = place;
  if (workers > 1 || place.tasks)
    whole.gpus = (int)std::accumulate(workerGpus.begin(), workerGpus.end(), 0u);
  auto cluster = clusterFor(whole);
  if (!cluster)
    return cluster.takeError();
  int gpus = (int)cluster->numGpus();
  if (gpus == 0)
    return makeError("the cluster has no GPU to place towers on");
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
  req.options.towers = towers;
  // --split auto: shares by the speeds of the towers' devices.
  std::vector<double> towerSpeeds;
  if (req.options.split.kind == SplitSpec::Auto) {
    auto speeds = cluster->towerSpeeds((unsigned)towers);
    if (!speeds)
      return speeds.takeError();
    towerSpeeds = *speeds;
    req.options.split = towers ? SplitSpec{SplitSpec::Weights, towerSpeeds} : SplitSpec();
  }
  if (req.options.batch <= 0 && !forward.batch())
    req.options.batch = kDefaultBatchPerTower * std::max(1, towers);
  PlacerOptions po;
  po.softPlacement = place.softPlacement;
  req.options.placer = makePlacerFunction(*cluster, kernelFor, po);
  std::string pipeline = req.pipeline.empty() ? kDefaultTrainingPipeline : req.pipeline;
  req.pipeline = pipeline + "," + kPlacementPipeline;
  auto m = compileTraining(forward, req);
  if (!m)
    return m.takeError();
  // The cluster travels with the plan, for `graphc inspect`.
  PlanInfo &info = (*m)->plan();
  info.cluster = *cluster;
  info.params = req.options.params;
  if (!towerSpeeds.empty()) {
    info.split = SplitSpec{SplitSpec::Auto, {}};
    info.splitSpeeds = Floats(towerSpeeds.begin(), towerSpeeds.end());
  } else if (req.options.split.kind == SplitSpec::Weights) {
    info.split = req.options.split;
  }
  recordWorkers(**m, place, workerGpus);
  if (auto e = addPsTasks(**m, place))
    return e;
  return m;
}

/// 67e12 -> "67", 33.5e12 -> "33.5" (TFLOP/s).
static std::string teraflops(double flops) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", flops / 1e12);
  return text;
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
    each.push_back(towerDevice((int)t) + " " + teraflops(speeds[t]));
  return text + " (--split auto: in proportion to the speeds of the towers' devices, " +
         llvm::join(each, ", ") + " TFLOP/s, so that they finish their towers together)";
}

llvm::Error addPsTasks(Module &plan, const PlacementRequest &place) {
  if (place.tasks && place.ps > 0)
    return makeError("--ps and " + place.tasksSource + " both give the ps tasks; use one");
  if (place.ps < 0)
    return makeError("--ps " + llvm::Twine(place.ps) + ": must be at least 0");
  if (place.psAsync && place.psTasks() == 0)
    return makeError("--ps-async applies to parameter-server tasks: give --ps P (or ps tasks in "
                     "the cluster)");
  if (place.psTasks() == 0)
    return llvm::Error::success();
  return shardOverPs(plan, place.psTasks(), place.psAsync);
}

llvm::Expected<std::unique_ptr<Module>> compileInference(const Module &forward, int64_t batch) {
  std::unique_ptr<Module> m = cloneModule(forward);
  if (batch > 0 && m->batch() != batch)
    if (auto e = bindBatch(*m, batch))
      return e;
  fuseConvAdd(*m);
  fuseConvRelu(*m);
  fuseBatchNormRelu(*m);
  fusePadIntoAveragePool(*m);
  if (auto e = verify(*m))
    return e;
  return m;
}

bool isCompiledForTraining(const Module &m) {
  return m.plan().training.value_or(false) && m.findGraph("forward") != nullptr;
}

bool isPlaced(const Module &m) {
  for (const Node *n : m.findGraph("main")->nodes())
    if (!n->assignedDevice().empty())
      return true;
  return false;
}

std::unique_ptr<Module> runnablePart(const Module &compiled) {
  std::unique_ptr<Module> m = cloneModule(compiled);
  m->removeGraph("forward");
  return m;
}

llvm::Expected<std::unique_ptr<Module>> forwardOf(const Module &compiled) {
  const Graph *fwd = compiled.findGraph("forward");
  if (!fwd)
    return makeError("module '" + compiled.name() + "' keeps no forward graph");
  auto m = std::make_unique<Module>(compiled.name());
  m->plan().seed = compiled.plan().seed;
  m->plan().source = compiled.plan().source;
  Graph &g = m->main();
  // Only the variables the forward graph reads, with their current values.
  for (const Node *n : fwd->nodes())
    if (n->op() == Op::Variable && !m->findVariable(n->attrs().getString("var"))) {
      Variable v = *compiled.findVariable(n->attrs().getString("var"));
      v.devices.clear();
      m->addVariable(std::move(v));
    }
  g.setOutputs(cloneGraphInto(*fwd, g));
  for (Node *n : g.nodes()) {
    n->setAssignedDevice("");
    n->setPlacementReason("");
  }
  if (auto e = verify(*m))
    return e;
  return m;
}

} // namespace graphc
