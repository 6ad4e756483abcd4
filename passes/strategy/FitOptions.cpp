//===- FitOptions.cpp - The changes the fit advisor tries -----------------===//

#include "passes/strategy/FitOptions.h"

#include "ir/MemoryLimit.h"
#include "passes/strategy/CompilePlan.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>

namespace graphc {

namespace {

/// The towers of a data-parallel request (one per GPU unless --towers).
unsigned towersOf(const FitContext &c) {
  if (c.place.strategy == Strategy::ModelParallel)
    return 0;
  return (unsigned)std::max(0, c.place.towers.value_or((int)c.gpus()));
}

/// The fewest samples a step may have: one per tower.
int64_t fewestSamples(const FitContext &c) {
  return std::max<int64_t>(1, towersOf(c));
}

/// The device that lacks the most in the refused plan.
const MemoryNeed &worst(const FitContext &c) {
  return *c.misfit.worst();
}

/// The largest share of the step's samples the worst device holds when
/// `extra` more bytes are stored on it, under a linear model: what it stores
/// stays, its arena scales with the samples. 0 when nothing would fit.
double sampleShareThatFits(const FitContext &c, int64_t extra) {
  const MemoryNeed &w = worst(c);
  double room = (double)(w.capacity - w.stored() - extra);
  if (room <= 0 || w.arena() <= 0)
    return 0;
  return room / (double)w.arena();
}

/// The first of `n` indices that passes `ok` (the last when none does),
/// by bisection: `ok` is monotone.
size_t firstIndex(size_t n, const std::function<bool(size_t)> &ok) {
  size_t lo = 0, hi = n ? n - 1 : 0;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ok(mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

std::vector<ParamPlacement> otherModes(const FitContext &c) {
  std::vector<ParamPlacement> modes{ParamPlacement{ParamPlacement::Cpu}};
  // gpu:K for the GPU with the most memory (then the fastest), as --params auto.
  const ClusterDevice *best = nullptr;
  for (const ClusterDevice &d : c.cluster.devices())
    if (d.id.isGpu() &&
        (!best || d.memoryBytes > best->memoryBytes ||
         (d.memoryBytes == best->memoryBytes && d.relativeSpeed > best->relativeSpeed)))
      best = &d;
  if (best)
    modes.push_back(ParamPlacement::onGpu(best->id.index));
  if (towersOf(c) >= 2 || c.place.workers > 1 || c.place.tasks) {
    modes.push_back(ParamPlacement{ParamPlacement::Spread});
    modes.push_back(ParamPlacement{ParamPlacement::Mirrored});
  }
  llvm::erase_if(modes, [&](ParamPlacement p) { return p == c.req.options.params; });
  return modes;
}

/// Not under --params auto (it tried every mode) nor with ps tasks (they
/// hold the variables).
EditList paramsEdits(const FitContext &c) {
  if (c.place.strategy != Strategy::DataParallel ||
      c.req.options.params.kind == ParamPlacement::Auto || c.place.psTasks() > 0)
    return {};
  std::vector<RequestEdit> edits;
  for (ParamPlacement mode : otherModes(c))
    edits.push_back(
        {"--params " + modeName(mode),
         "the same training, the variables " + std::string(mode.kind == ParamPlacement::Cpu
                                                               ? "on the host"
                                                               : "placed as " + modeName(mode)),
         [mode](CompileRequest &r, PlacementRequest &) { r.options.params = mode; }});
  return editList(std::move(edits));
}

EditList modelParallelEdits(const FitContext &c) {
  const PlacementRequest &p = c.place;
  if (p.strategy != Strategy::DataParallel || p.tasks || p.workers > 1 || p.psTasks() > 0 ||
      (p.towers && *p.towers != (int)c.gpus()) || c.req.options.split.kind != SplitSpec::Even ||
      c.gpus() < 2)
    return {};
  return editList(
      {{"--strategy model-parallel",
        "the same training, one replica spread over the " + llvm::itostr(c.gpus()) + " GPUs",
        [](CompileRequest &, PlacementRequest &p) {
          p.strategy = Strategy::ModelParallel;
          p.towers.reset();
        }}});
}

/// Activations recomputed in the backward pass (passes/Recompute.h): the
/// same training to the bit, for extra compute. Every strategy runs the pass
/// (not --params auto, ps tasks, nor --accumulate, which it refuses).
EditList recomputeEdits(const FitContext &c) {
  const PlacementRequest &p = c.place;
  if (c.req.options.recompute.mode != RecomputeMode::Off || c.accumulate > 1 || p.psTasks() > 0 ||
      c.req.options.params.kind == ParamPlacement::Auto)
    return {};
  return editList({{"--recompute auto",
                    "the same training, activations recomputed in the backward pass",
                    [](CompileRequest &r, PlacementRequest &) {
                      r.options.recompute.mode = RecomputeMode::Auto;
                    }}});
}

/// Mirrored variables' optimizer slots split over the towers: the same
/// update to the bit, 1/N of the slots on each GPU (where the request allows
/// it: checkShardRequest).
EditList shardEdits(const FitContext &c) {
  if (c.req.options.shardOptimizer || c.req.options.params.kind != ParamPlacement::Mirrored)
    return {};
  CompileRequest sharded = c.req;
  sharded.options.shardOptimizer = true;
  if (llvm::Error refused = checkShardRequest(sharded, c.place)) {
    llvm::consumeError(std::move(refused));
    return {};
  }
  return editList({{"--shard-optimizer",
                    "the same training, the optimizer slots split over the towers",
                    [](CompileRequest &r, PlacementRequest &) { r.options.shardOptimizer = true; }}});
}

/// A pipeline's micro-batches: more of them, each smaller, the same
/// samples in one update; under 1F1B a stage holds at most S of them.
EditList pipelineEdits(const FitContext &c) {
  if (c.place.strategy != Strategy::Pipeline || c.gpus() == 0)
    return {};
  const int64_t stages = c.place.stages.value_or((int)c.gpus());
  if (stages < 1 || c.gpus() % stages != 0)
    return {};
  const int64_t perPipeline = c.batch / ((int64_t)c.gpus() / stages);
  auto more = std::make_shared<std::vector<int64_t>>();
  for (int64_t m = c.req.options.pipeline.microBatches + 1; m <= perPipeline; ++m)
    if (perPipeline % m == 0)
      more->push_back(m);
  return {more->size(), [more, perPipeline](size_t i) {
            const int64_t m = (*more)[i];
            return RequestEdit{"--micro-batches " + llvm::itostr(m),
                               "the same update, each pipeline's " + llvm::itostr(perPipeline) +
                                   " samples in " + llvm::itostr(m) + " micro-batches",
                               [m](CompileRequest &r, PlacementRequest &) {
                                 r.options.pipeline.microBatches = (unsigned)m;
                               }};
          }};
}

/// The micro-batches --accumulate may split the batch into: b/k for the
/// divisors k > 1 of b, at least one sample per tower (the same number for
/// each under --remainder error), largest first.
std::vector<int64_t> microBatches(const FitContext &c) {
  std::vector<int64_t> out;
  for (int64_t k = 2; k * k <= c.batch; ++k)
    if (c.batch % k == 0) {
      out.push_back(c.batch / k);
      if (k * k != c.batch)
        out.push_back(k);
    }
  if (c.batch > 1)
    out.push_back(1);
  const bool even = c.req.options.remainder == RemainderPolicy::Error;
  llvm::erase_if(
      out, [&](int64_t m) { return m < fewestSamples(c) || (even && m % fewestSamples(c) != 0); });
  llvm::sort(out, std::greater<int64_t>());
  return out;
}

EditList accumulateEdits(const FitContext &c) {
  if (c.place.psAsync)
    return {};
  auto micro = std::make_shared<std::vector<int64_t>>(microBatches(c));
  const int64_t b = c.batch, a = c.accumulate;
  return {micro->size(), [micro, b, a](size_t i) {
            const int64_t m = (*micro)[i], k = a * (b / m);
            return RequestEdit{"--batch " + llvm::itostr(m) + " --accumulate " + llvm::itostr(k),
                               "the same " + llvm::itostr(a * b) + " samples per update in " +
                                   llvm::itostr(k) + " micro-batches of " + llvm::itostr(m),
                               [m, k](CompileRequest &r, PlacementRequest &) {
                                 r.options.batch = m;
                                 r.options.accumulate = (unsigned)k;
                               }};
          }};
}

/// Each tower accumulates its gradients on its own device: about every
/// trainable parameter's bytes more on each GPU.
size_t accumulateGuess(const FitContext &c, size_t size) {
  int64_t params = 0;
  for (const Variable &v : c.forward.variables())
    if (v.trainable())
      params += v.type.bytes();
  const double share = sampleShareThatFits(c, c.accumulate > 1 ? 0 : params);
  std::vector<int64_t> micro = microBatches(c);
  return firstIndex(size, [&](size_t i) { return (double)micro[i] <= share * (double)c.batch; });
}

/// The cluster file's cluster with `gpus` GPUs: the last GPU repeated, with
/// its links (to the host, and to the other GPUs at its fastest GPU link).
llvm::Expected<Cluster> withMoreGpus(const Cluster &c, unsigned gpus) {
  std::vector<ClusterDevice> devices(c.devices().begin(), c.devices().end());
  std::vector<Link> links(c.links().begin(), c.links().end());
  const ClusterDevice *last = nullptr;
  for (const ClusterDevice &d : c.devices())
    if (d.id.isGpu())
      last = &d;
  double gpuLink = 0;
  for (const Link &l : c.links()) {
    const std::string &other = l.a == last->name ? l.b : l.b == last->name ? l.a : "";
    if (const ClusterDevice *o = other.empty() ? nullptr : c.find(other); o && o->id.isGpu())
      gpuLink = std::max(gpuLink, l.bandwidth);
  }
  std::vector<std::string> added;
  unsigned next = 0;
  while (c.numGpus() + added.size() < gpus) {
    std::string name;
    do
      name = "gpu:" + std::to_string(next++);
    while (c.find(name) || llvm::is_contained(added, name));
    ClusterDevice d = *last;
    d.name = name;
    devices.push_back(d);
    for (const Link &l : c.links())
      if (l.a == last->name || l.b == last->name) {
        Link copy = l;
        (copy.a == last->name ? copy.a : copy.b) = name;
        links.push_back(copy);
      }
    if (gpuLink > 0) {
      links.push_back({last->name, name, gpuLink});
      for (const std::string &earlier : added)
        links.push_back({earlier, name, gpuLink});
    }
    added.push_back(name);
  }
  auto bigger = Cluster::create(std::move(devices), std::move(links),
                                c.kindPeakFlops(DeviceKind::CPU), c.kindPeakFlops(DeviceKind::GPU));
  if (!bigger)
    return bigger.takeError();
  for (DeviceKind k : {DeviceKind::CPU, DeviceKind::GPU})
    bigger->setCalibration(k, c.calibration(k));
  return bigger;
}

const ClusterDevice *firstGpu(const Cluster &c) {
  for (const ClusterDevice &d : c.devices())
    if (d.id.isGpu())
      return &d;
  return nullptr;
}

/// Whether every GPU of the cluster is alike (memory and speed).
bool gpusAlike(const Cluster &c) {
  const ClusterDevice *first = nullptr;
  for (const ClusterDevice &d : c.devices())
    if (d.id.isGpu()) {
      if (!first)
        first = &d;
      else if (d.memoryBytes != first->memoryBytes || d.relativeSpeed != first->relativeSpeed)
        return false;
    }
  return first != nullptr;
}

EditList moreGpuEdits(const FitContext &c) {
  const PlacementRequest &p = c.place;
  if (p.tasks || (p.towers && *p.towers != (int)c.gpus()) ||
      c.req.options.split.kind == SplitSpec::Weights)
    return {};
  const std::string batch = " (the same global batch of " + llvm::itostr(c.batch) + ")";
  // Without --batch, more towers would take more samples: the flags pin it.
  const std::string pin = c.batchGiven ? "" : "--batch " + llvm::itostr(c.batch) + " ";
  const std::string with = c.batchGiven ? "" : " with --batch " + llvm::itostr(c.batch);
  // Data parallel: one sample per tower at least.
  const int64_t most = p.strategy == Strategy::DataParallel ? c.batch : INT64_MAX;
  auto count = [&](int64_t have, int64_t per) {
    int64_t last = std::min<int64_t>(have * kMoreDevicesFactor, (Cluster::kMaxDevices - 1) / per);
    last = std::min(last, most / per);
    return (size_t)std::max<int64_t>(0, last - have);
  };
  if (p.workers > 1) {
    const int w0 = p.workers, gpus = p.gpus;
    return {count(w0, gpus), [=](size_t i) {
              const int w = w0 + 1 + (int)i;
              return RequestEdit{pin + "--workers " + llvm::itostr(w),
                                 llvm::itostr(w) + " workers of " + llvm::itostr(gpus) +
                                     (gpus == 1 ? " GPU" : " GPUs") + batch,
                                 [w](CompileRequest &, PlacementRequest &p) { p.workers = w; }};
            }};
  }
  const int n = (int)c.gpus();
  if (p.clusterFile.empty() && !p.cluster)
    return {count(n, 1), [=](size_t i) {
              const int g = n + 1 + (int)i;
              return RequestEdit{pin + "--gpus " + llvm::itostr(g),
                                 llvm::itostr(g) + " GPUs" + batch,
                                 [g](CompileRequest &, PlacementRequest &p) {
                                   p.gpus = g;
                                   if (p.towers)
                                     p.towers = g;
                                 }};
            }};
  if (!gpusAlike(c.cluster))
    return {};
  const Cluster cluster = c.cluster;
  return {count(n, 1), [=](size_t i) {
            const int g = n + 1 + (int)i;
            auto bigger = withMoreGpus(cluster, (unsigned)g);
            std::optional<Cluster> made;
            if (bigger)
              made = std::move(*bigger);
            else
              llvm::consumeError(bigger.takeError()); // its compile says so
            const ClusterDevice &gpu = *firstGpu(cluster);
            return RequestEdit{"a cluster of " + llvm::itostr(g) + " GPUs like " + gpu.name + " (" +
                                   bytesText(gpu.memoryBytes) + " each)" + with,
                               llvm::itostr(g) + " GPUs" + batch,
                               [made, g](CompileRequest &, PlacementRequest &p) {
                                 p.cluster = made;
                                 p.clusterFile.clear();
                                 if (!made) { // no cluster: the compile fails
                                   p.gpus = 0;
                                   p.hostWithoutDevices = false;
                                 }
                                 if (p.towers)
                                   p.towers = g;
                               }};
          }};
}

/// Data parallel: each tower's share of the batch shrinks with the GPUs;
/// model parallel: the whole replica spreads over them.
size_t moreGpuGuess(const FitContext &c, size_t size) {
  double factor;
  if (c.place.strategy == Strategy::ModelParallel) {
    int64_t all = 0, capacity = 0;
    for (const MemoryNeed &n : c.misfit.needs())
      if (n.kind == DeviceKind::GPU)
        all += n.total(), capacity += n.capacity;
    factor = capacity > 0 ? (double)all / (double)capacity : 1;
  } else {
    double share = sampleShareThatFits(c, 0);
    factor = share > 0 ? 1 / share : (double)kMoreDevicesFactor;
  }
  const double have = c.place.workers > 1 ? (double)c.place.workers : (double)c.gpus();
  const double wanted = std::ceil(factor * have);
  return (size_t)std::clamp(wanted - have - 1, 0.0, (double)(size ? size - 1 : 0));
}

/// Batches step samples apart: one, or one per tower under --remainder error.
int64_t batchStep(const FitContext &c) {
  return c.req.options.remainder == RemainderPolicy::Error ? fewestSamples(c) : 1;
}

EditList smallerBatchEdits(const FitContext &c) {
  const int64_t step = batchStep(c), largest = (c.batch - 1) / step * step;
  if (largest < fewestSamples(c))
    return {};
  const int64_t a = c.accumulate, was = c.batch;
  return {(size_t)((largest - fewestSamples(c)) / step + 1), [=](size_t i) {
            const int64_t b = largest - (int64_t)i * step;
            return RequestEdit{"--batch " + llvm::itostr(b),
                               llvm::itostr(a * b) + " samples per update instead of " +
                                   llvm::itostr(a * was),
                               [b](CompileRequest &r, PlacementRequest &) { r.options.batch = b; }};
          }};
}

size_t smallerBatchGuess(const FitContext &c, size_t size) {
  const int64_t step = batchStep(c), largest = (c.batch - 1) / step * step;
  const double fits = sampleShareThatFits(c, 0) * (double)c.batch;
  return (size_t)std::clamp(std::ceil(((double)largest - fits) / (double)step), 0.0,
                            (double)(size ? size - 1 : 0));
}

} // namespace

EditList editList(std::vector<RequestEdit> edits) {
  auto all = std::make_shared<std::vector<RequestEdit>>(std::move(edits));
  return {all->size(), [all](size_t i) { return (*all)[i]; }};
}

const std::vector<FitOptionKind> &fitOptions() {
  static const std::vector<FitOptionKind> all = {
      {"params", FitChange::SameTraining, false, paramsEdits, nullptr},
      {"model-parallel", FitChange::SameTraining, false, modelParallelEdits, nullptr},
      {"recompute", FitChange::SameTraining, false, recomputeEdits, nullptr},
      {"shard-optimizer", FitChange::SameTraining, false, shardEdits, nullptr},
      {"micro-batches", FitChange::SameTraining, true, pipelineEdits,
       [](const FitContext &, size_t) { return size_t(0); }},
      {"accumulate", FitChange::SameTraining, true, accumulateEdits, accumulateGuess},
      {"gpus", FitChange::MoreDevices, true, moreGpuEdits, moreGpuGuess},
      {"batch", FitChange::SmallerBatch, true, smallerBatchEdits, smallerBatchGuess},
  };
  return all;
}

} // namespace graphc
