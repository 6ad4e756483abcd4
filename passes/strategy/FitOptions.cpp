//===- FitOptions.cpp - The changes the fit advisor tries -----------------===//

#include "passes/strategy/FitOptions.h"

#include "ir/MemoryLimit.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>

namespace graphc {

namespace {

std::string str(int64_t n) { return std::to_string(n); }

/// The towers of a data-parallel request (one per GPU unless --towers).
unsigned towersOf(const FitContext &c) {
  if (c.place.strategy == Strategy::ModelParallel)
    return 0;
  return (unsigned)std::max(0, c.place.towers.value_or((int)c.gpus()));
}

/// The fewest samples a step may have: one per tower.
int64_t fewestSamples(const FitContext &c) { return std::max<int64_t>(1, towersOf(c)); }

/// The device that lacks the most in the refused plan.
const MemoryNeed &worst(const FitContext &c) { return *c.misfit.worst(); }

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

/// The first of `n` indices that passes `ok`, or the last.
size_t firstIndex(size_t n, const std::function<bool(size_t)> &ok) {
  for (size_t i = 0; i < n; ++i)
    if (ok(i))
      return i;
  return n ? n - 1 : 0;
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

std::vector<RequestEdit> paramsEdits(const FitContext &c) {
  if (c.place.strategy != Strategy::DataParallel ||
      c.req.options.params.kind == ParamPlacement::Auto)
    return {};
  std::vector<RequestEdit> edits;
  for (ParamPlacement mode : otherModes(c))
    edits.push_back({"--params " + modeName(mode), "the same training, the variables " +
                                                       std::string(mode.kind == ParamPlacement::Cpu
                                                                       ? "on the host"
                                                                       : "placed as " +
                                                                             modeName(mode)),
                     [mode](CompileRequest &r, PlacementRequest &) { r.options.params = mode; }});
  return edits;
}

std::vector<RequestEdit> modelParallelEdits(const FitContext &c) {
  const PlacementRequest &p = c.place;
  if (p.strategy != Strategy::DataParallel || p.tasks || p.workers > 1 || p.psTasks() > 0 ||
      (p.towers && *p.towers != (int)c.gpus()) || c.req.options.split.kind != SplitSpec::Even ||
      c.gpus() < 2)
    return {};
  return {{"--strategy model-parallel",
           "the same training, one replica spread over the " + str(c.gpus()) + " GPUs",
           [](CompileRequest &, PlacementRequest &p) {
             p.strategy = Strategy::ModelParallel;
             p.towers.reset();
           }}};
}

std::vector<RequestEdit> accumulateEdits(const FitContext &c) {
  if (c.place.psAsync)
    return {};
  std::vector<RequestEdit> edits;
  const int64_t b = c.batch, a = c.accumulate;
  for (int64_t k = 2; k <= b; ++k) {
    if (b % k || b / k < fewestSamples(c))
      continue;
    const int64_t micro = b / k;
    edits.push_back({"--batch " + str(micro) + " --accumulate " + str(a * k),
                     "the same " + str(a * b) + " samples per update in " + str(a * k) +
                         " micro-batches of " + str(micro),
                     [micro, k, a](CompileRequest &r, PlacementRequest &) {
                       r.options.batch = micro;
                       r.options.accumulate = (unsigned)(a * k);
                     }});
  }
  return edits;
}

/// Each tower accumulates its gradients on its own device: about every
/// trainable parameter's bytes more on each GPU.
size_t accumulateGuess(const FitContext &c, llvm::ArrayRef<RequestEdit> edits) {
  int64_t params = 0;
  for (const Variable &v : c.forward.variables())
    if (v.trainable())
      params += v.type.bytes();
  const double share = sampleShareThatFits(c, c.accumulate > 1 ? 0 : params);
  std::vector<int64_t> micro;
  for (int64_t k = 2; k <= c.batch; ++k)
    if (c.batch % k == 0 && c.batch / k >= fewestSamples(c))
      micro.push_back(c.batch / k);
  return firstIndex(edits.size(), [&](size_t i) { return (double)micro[i] <= share * c.batch; });
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

std::vector<RequestEdit> moreGpuEdits(const FitContext &c) {
  const PlacementRequest &p = c.place;
  if (p.tasks || (p.towers && *p.towers != (int)c.gpus()) ||
      c.req.options.split.kind == SplitSpec::Weights)
    return {};
  std::vector<RequestEdit> edits;
  const std::string batch = " (the same global batch of " + str(c.batch) + ")";
  if (p.workers > 1) {
    for (int w = p.workers + 1; w <= p.workers * (int)kMoreDevicesFactor; ++w)
      if ((int64_t)w * p.gpus <= c.batch && (unsigned)(w * p.gpus) < Cluster::kMaxDevices)
        edits.push_back({"--workers " + str(w), str(w) + " workers of " + str(p.gpus) + " GPUs" +
                                                    batch,
                         [w](CompileRequest &, PlacementRequest &p) { p.workers = w; }});
    return edits;
  }
  const unsigned n = c.gpus();
  const bool fileCluster = !p.clusterFile.empty() || p.cluster;
  if (fileCluster && !gpusAlike(c.cluster))
    return {};
  for (unsigned g = n + 1; g <= n * kMoreDevicesFactor && g < Cluster::kMaxDevices; ++g) {
    if (p.strategy == Strategy::DataParallel && (int64_t)g > c.batch)
      break;
    if (!fileCluster) {
      edits.push_back({"--gpus " + str(g), str(g) + " GPUs" + batch,
                       [g](CompileRequest &, PlacementRequest &p) {
                         p.gpus = (int)g;
                         if (p.towers)
                           p.towers = (int)g;
                       }});
      continue;
    }
    auto bigger = withMoreGpus(c.cluster, g);
    if (!bigger) {
      llvm::consumeError(bigger.takeError());
      break;
    }
    const ClusterDevice *gpu = &bigger->devices().back();
    edits.push_back({"a cluster of " + str(g) + " GPUs like " + gpu->name + " (" +
                         bytesText(gpu->memoryBytes) + " each)",
                     str(g) + " GPUs" + batch,
                     [cluster = *bigger, g](CompileRequest &, PlacementRequest &p) {
                       p.cluster = cluster;
                       p.clusterFile.clear();
                       if (p.towers)
                         p.towers = (int)g;
                     }});
  }
  return edits;
}

/// Data parallel: each tower's share of the batch shrinks with the GPUs;
/// model parallel: the whole replica spreads over them.
size_t moreGpuGuess(const FitContext &c, llvm::ArrayRef<RequestEdit> edits) {
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
  const double wanted = std::ceil(factor * (c.place.workers > 1 ? c.place.workers : c.gpus()));
  const double have = c.place.workers > 1 ? c.place.workers : c.gpus();
  return (size_t)std::clamp(wanted - have - 1, 0.0, (double)(edits.size() ? edits.size() - 1 : 0));
}

std::vector<RequestEdit> smallerBatchEdits(const FitContext &c) {
  std::vector<RequestEdit> edits;
  const int64_t step = c.req.options.remainder == RemainderPolicy::Error ? fewestSamples(c) : 1;
  const int64_t a = c.accumulate;
  for (int64_t b = (c.batch - 1) / step * step; b >= fewestSamples(c); b -= step)
    edits.push_back({"--batch " + str(b),
                     str(a * b) + " samples per update instead of " + str(a * c.batch),
                     [b](CompileRequest &r, PlacementRequest &) { r.options.batch = b; }});
  return edits;
}

size_t smallerBatchGuess(const FitContext &c, llvm::ArrayRef<RequestEdit> edits) {
  const int64_t step = c.req.options.remainder == RemainderPolicy::Error ? fewestSamples(c) : 1;
  const double fits = sampleShareThatFits(c, 0) * (double)c.batch;
  const double largest = (double)((c.batch - 1) / step * step);
  return (size_t)std::clamp(std::ceil((largest - fits) / (double)step), 0.0,
                            (double)(edits.size() ? edits.size() - 1 : 0));
}

} // namespace

const std::vector<FitOptionKind> &fitOptions() {
  static const std::vector<FitOptionKind> all = {
      {"params", FitChange::SameTraining, false, paramsEdits, nullptr},
      {"model-parallel", FitChange::SameTraining, false, modelParallelEdits, nullptr},
      {"accumulate", FitChange::SameTraining, true, accumulateEdits, accumulateGuess},
      {"gpus", FitChange::MoreDevices, true, moreGpuEdits, moreGpuGuess},
      {"batch", FitChange::SmallerBatch, true, smallerBatchEdits, smallerBatchGuess},
  };
  return all;
}

} // namespace graphc
