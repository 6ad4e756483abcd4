#include "passes/strategy/PipelineStrategy.h"

#include "ir/Clone.h"
#include "ir/Cost.h"
#include "ir/Diagnostics.h"
#include "passes/PipelineStages.h"
#include "passes/strategy/Compile.h"
#include "passes/strategy/RecomputeMeasures.h"
#include "placement/Placer.h"
#include "placement/analysis/MemoryNeeds.h"
#include "placement/analysis/PipelineBubble.h"
#include "placement/analysis/StepTimeModel.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

namespace graphc {

namespace {

/// The most cuts a compile tries (rule of PipelineStrategy::compile).
constexpr int kCuts = 4;

/// The flags a pipeline does not combine with (file comment).
llvm::Error checkRequest(const CompileRequest &req, const PlacementRequest &place) {
  const CompileOptions &o = req.options;
  const std::string us = "--strategy pipeline";
  if (place.workers > 1 || place.tasks || place.psTasks() > 0)
    return makeError(us + " runs in one process: several workers, --tasks and --ps are not "
                          "supported with it (drop them, or use --strategy data-parallel)");
  if (place.towers)
    return makeError(us +
                     " makes its own towers (one per micro-batch and pipeline): drop "
                     "--towers " +
                     llvm::itostr(*place.towers) +
                     " (--stages S with --gpus N gives N/S pipelines)");
  if (o.split.kind != SplitSpec::Even)
    return makeError(us + " splits the batch evenly into micro-batches: drop --split");
  if (o.params.kind != ParamPlacement::Cpu)
    return makeError(us + " keeps each variable on its stage's GPU (mirrored between "
                          "pipelines): drop --params " +
                     modeName(o.params));
  if (o.accumulate > 1)
    return makeError(
        us +
        " already sums its micro-batches' gradients within a step: instead of "
        "--accumulate " +
        llvm::itostr(o.accumulate) + ", give " +
        (o.batch > 0 ? "--batch " + llvm::itostr(o.batch * o.accumulate) + " " : std::string()) +
        "--micro-batches " + llvm::itostr((int64_t)o.pipeline.microBatches * o.accumulate) +
        " (the same samples per update in one step)");
  if (o.bn == BnMode::Sync)
    return makeError(us + ": --bn sync would make the micro-batches of a stage, which run one "
                          "after another on its GPU, wait for each other; use --bn local "
                          "(statistics per micro-batch) or --bn frozen");
  if (o.lossScale != 0)
    return makeError(us + " does not combine with dynamic loss scaling (--precision fp16 or "
                          "--loss-scale) yet: give --loss-scale off, or another strategy");
  return llvm::Error::success();
}

/// S stages and P pipelines on `gpus` GPUs.
llvm::Expected<std::pair<unsigned, unsigned>> stagesAndPipelines(const PlacementRequest &place,
                                                                 unsigned gpus) {
  const int stages = place.stages.value_or((int)gpus);
  if (stages < 1)
    return makeError("--stages " + llvm::itostr(stages) + ": a pipeline needs one stage at least");
  if ((unsigned)stages > gpus)
    return makeError("--stages " + llvm::itostr(stages) +
                     " needs a GPU per stage; the cluster has " + llvm::itostr(gpus) +
                     " (give --gpus " + llvm::itostr(stages) + ", or --stages " +
                     llvm::itostr(gpus) + " or fewer)");
  if (gpus % (unsigned)stages != 0)
    return makeError("--stages " + llvm::itostr(stages) + " with " + llvm::itostr(gpus) +
                     " GPUs: each pipeline takes " + llvm::itostr(stages) +
                     " GPUs, so the GPUs must be a multiple of the stages (give --gpus " +
                     llvm::itostr((int64_t)gpus / stages * stages) + " or " +
                     llvm::itostr((int64_t)(gpus / stages + 1) * stages) + ")");
  return std::make_pair((unsigned)stages, gpus / (unsigned)stages);
}

/// The global batch: given, the model's, or kDefaultBatch made a multiple of
/// the micro-batches of every pipeline; refused when M·P does not divide it.
llvm::Expected<int64_t> batchOf(const Module &forward, const CompileRequest &req, unsigned towers,
                                unsigned pipelines, unsigned microBatches) {
  int64_t batch = req.options.batch > 0 ? req.options.batch : forward.batch().value_or(0);
  if (batch <= 0) {
    const int64_t step = (int64_t)microBatches * pipelines;
    return (kDefaultBatch + step - 1) / step * step;
  }
  if (batch % towers != 0) {
    int64_t lower = batch / towers * towers, higher = lower + towers;
    return makeError(
        "--micro-batches " + llvm::itostr(microBatches) + " does not divide the batch " +
        llvm::itostr(batch) +
        (pipelines > 1 ? " among " + llvm::itostr(pipelines) + " pipelines" : std::string()) +
        ": the batch must be a multiple of " + llvm::itostr(towers) + " (give --batch " +
        (lower > 0 ? llvm::itostr(lower) + " or " : std::string()) + llvm::itostr(higher) +
        ", or --micro-batches dividing " + llvm::itostr(batch / pipelines) + ")");
  }
  return batch;
}

/// The training pipeline with pipeline-stages where aggregate-gradients
/// was.
llvm::Expected<std::string> withStages(llvm::StringRef training) {
  llvm::SmallVector<llvm::StringRef, 24> names;
  training.split(names, ',');
  auto aggregate = llvm::find_if(names, [](llvm::StringRef n) {
    return n.trim() == "aggregate-gradients";
  });
  if (aggregate == names.end())
    return makeError("--strategy pipeline runs pipeline-stages where aggregate-gradients is; "
                     "the --pipeline given has no aggregate-gradients");
  *aggregate = "pipeline-stages";
  return llvm::join(names, ",");
}

/// Whether every GPU of `plan` fits its memory (the executor's plan); a
/// stage whose GPU overflows weighs more in `weights`, by need / capacity
/// and 5% more.
llvm::Expected<bool> weighOverflows(const Module &plan, const Cluster &cluster,
                                    std::vector<double> &weights) {
  auto needs = memoryNeeds(plan);
  if (!needs)
    return needs.takeError();
  bool fits = true;
  for (const MemoryNeed &n : *needs)
    if (const ClusterDevice *d = cluster.find(n.device); d && d->id.isGpu() && !n.fits()) {
      weights[d->id.index % weights.size()] *= 1.05 * (double)n.total() / (double)n.capacity;
      fits = false;
    }
  return fits;
}

/// `plan`, with the forward graph kept (keepForwardGraph).
std::unique_ptr<Module> withForwardGraph(const Module &forward, std::unique_ptr<Module> plan) {
  keepForwardGraph(forward, *plan);
  return plan;
}

} // namespace

llvm::Expected<std::unique_ptr<Module>>
PipelineStrategy::compile(const Module &forward, const CompileRequest &request,
                          const PlacementRequest &place) const {
  if (auto e = checkRequest(request, place))
    return e;
  auto cluster = clusterFor(place);
  if (!cluster)
    return cluster.takeError();
  if (cluster->numGpus() == 0)
    return makeError("--strategy pipeline: the cluster has no GPU to put stages on");
  auto sp = stagesAndPipelines(place, cluster->numGpus());
  if (!sp)
    return sp.takeError();
  CompileRequest req = request;
  PipelineOptions &po = req.options.pipeline;
  po.stages = sp->first;
  po.pipelines = sp->second;
  const unsigned towers = po.microBatches * po.pipelines;
  auto batch = batchOf(forward, req, towers, po.pipelines, po.microBatches);
  if (!batch)
    return batch.takeError();
  req.options.batch = *batch;
  req.options.towers = (int)towers;
  req.options.remainder = RemainderPolicy::Error;
  req.options.fuseBatchNormReluGradients = true; // the stages are GPUs
  // A node's time on the first stage's GPU; the stages are cut by it.
  auto held = std::make_shared<Cluster>(*cluster);
  auto model = std::make_shared<StepTimeModel>(*held);
  const ClusterDevice *gpu = held->find(stageDevice(0, 0, po.stages));
  po.seconds = [held, model, gpu](const Node &n) {
    return gpu ? model->kernelSeconds(n.op(), nodeCost(n), *gpu) : 1.0;
  };
  po.sumSeconds = [held, model, gpu](int64_t bytes) {
    NodeCost add;
    add.flops = bytes / 4;
    add.bytesRead = 2 * bytes;
    add.bytesWritten = bytes;
    return gpu ? model->kernelSeconds(Op::AddN, add, *gpu) : 0.0;
  };
  auto training = withStages(trainingPipeline(req));
  if (!training)
    return training.takeError();
  PlacerOptions placer;
  placer.softPlacement = place.softPlacement;
  req.options.placer = makePlacerFunction(*cluster, kernelFor, placer);
  setRecomputeMeasures(req.options, *cluster);
  // The cut balances time. A stage whose GPU the plan overflows weighs more
  // (by need / capacity) and the step is cut again, while the cut moves, up
  // to kCuts. When none fits, --recompute auto tries the cuts again in the
  // same order with activations recomputed (a cut costs no compute; a copy
  // does) and keeps the first that fits; the last plan goes on otherwise
  // (the tools refuse one that does not fit, with each device's figures and
  // advice).
  auto compileCut = [&](llvm::ArrayRef<llvm::StringRef> passes)
      -> llvm::Expected<std::unique_ptr<Module>> {
    std::unique_ptr<Module> m = cloneModule(forward);
    m->plan().cluster = *cluster;
    m->plan().strategy = Strategy::Pipeline;
    if (auto e = runPipelines(*m, req.options, req.dump, passes))
      return e;
    return m;
  };
  std::vector<llvm::StringRef> plain{*training, kPlacementPipeline};
  po.stageWeights.assign(po.stages, 1.0);
  std::vector<std::vector<double>> cuts;
  std::optional<std::string> previousCut;
  std::unique_ptr<Module> last;
  for (int cut = 1; !last; ++cut) {
    auto m = compileCut(plain);
    if (!m)
      return m.takeError();
    cuts.push_back(po.stageWeights);
    auto fits = weighOverflows(**m, *cluster, po.stageWeights);
    if (!fits)
      return fits.takeError();
    if (*fits)
      return withForwardGraph(forward, std::move(*m));
    if (cut == kCuts || (*m)->plan().pipeline == previousCut)
      last = std::move(*m);
    else
      previousCut = (*m)->plan().pipeline;
  }
  std::vector<llvm::StringRef> recomputing = plain;
  llvm::append_range(recomputing, recomputePipelines(req.options));
  if (recomputing.size() > plain.size())
    for (const std::vector<double> &weights : cuts) {
      po.stageWeights = weights;
      auto m = compileCut(recomputing);
      if (!m)
        return m.takeError();
      std::vector<double> ignored = weights;
      auto fits = weighOverflows(**m, *cluster, ignored);
      if (!fits)
        return fits.takeError();
      if (*fits)
        return withForwardGraph(forward, std::move(*m));
    }
  return withForwardGraph(forward, std::move(last));
}

std::optional<PipelineShape> pipelineShape(const Module &plan) {
  const PlanInfo &p = plan.plan();
  if (p.strategy != Strategy::Pipeline || !p.pipelineStages)
    return std::nullopt;
  return PipelineShape{(unsigned)*p.pipelineStages, (unsigned)p.microBatches.value_or(1),
                       (unsigned)p.pipelines.value_or(1),
                       p.pipelineSchedule.value_or(PipelineSchedule::OneFOneB)};
}

std::string describePipeline(const Module &plan) {
  std::optional<PipelineShape> shape = pipelineShape(plan);
  if (!shape)
    return "";
  const unsigned S = shape->stages, M = shape->microBatches, P = shape->pipelines;
  std::string each;
  auto parsed = llvm::json::parse(plan.plan().pipeline.value_or(""));
  if (!parsed)
    llvm::consumeError(parsed.takeError());
  else if (const llvm::json::Array *stages = parsed->getAsArray())
    for (const llvm::json::Value &v : *stages)
      if (const llvm::json::Object *s = v.getAsObject())
        each += llvm::formatv("{0}{1} from {2} ({3} forward nodes, {4:f2} ms)",
                              each.empty() ? "" : "; ", s->getString("device").getValueOr(""),
                              s->getString("first").getValueOr(""),
                              std::to_string(s->getInteger("forward_nodes").getValueOr(0)),
                              s->getNumber("seconds").getValueOr(0) * 1e3)
                    .str();
  return llvm::formatv("pipeline: {0} stages x {1} micro-batches ({2}), {3} pipeline{4}{5}; "
                       "bubble in theory (S-1)/(M+S-1) = {6:P1}; {7}",
                       std::to_string(S), std::to_string(M), modeName(shape->schedule),
                       std::to_string(P), P == 1 ? "" : "s",
                       P > 1 ? " (per-stage gradients all-reduced between them)" : "",
                       theoreticalBubble(S, M), each)
      .str();
}

} // namespace graphc
