#include "passes/strategy/RecomputeMeasures.h"

#include "ir/Cost.h"
#include "passes/Recompute.h"
#include "placement/analysis/MemoryNeeds.h"
#include "placement/analysis/StepTimeModel.h"

#include "llvm/ADT/StringMap.h"

#include <map>
#include <memory>
#include <optional>

namespace graphc {

void setRecomputeMeasures(CompileOptions &options, const Cluster &cluster) {
  options.recompute.measure = [](const Module &m) -> llvm::Expected<std::vector<DeviceFit>> {
    auto needs = memoryNeeds(m);
    if (!needs)
      return needs.takeError();
    std::vector<DeviceFit> fits;
    for (const MemoryNeed &n : *needs)
      fits.push_back({n.device, n.total(), n.capacity});
    return fits;
  };
  auto held = std::make_shared<Cluster>(cluster);
  auto model = std::make_shared<StepTimeModel>(*held);
  options.recompute.seconds = [held, model](const Node &n) {
    const ClusterDevice *d = held->find(n.assignedDevice().value_or(DeviceId::host()));
    return d ? model->kernelSeconds(n.op(), nodeCost(n), *d) : 0.0;
  };
}

std::vector<llvm::StringRef> recomputePipelines(const CompileOptions &options) {
  if (options.recompute.mode == RecomputeMode::Off)
    return {};
  return {"recompute,verify"};
}

std::vector<DeviceRecompute> recomputeByDevice(const Module &placed) {
  const Graph *g = placed.findGraph("main");
  if (!g || llvm::none_of(g->nodes(), [](const Node *n) { return isRecomputed(*n); }))
    return {};
  std::optional<StepTimeModel> model;
  if (placed.plan().cluster)
    model.emplace(*placed.plan().cluster);
  std::map<std::string, DeviceRecompute> devices;
  for (const Node *n : g->nodes()) {
    DeviceId id = n->assignedDevice().value_or(DeviceId::host());
    DeviceRecompute &d = devices[id.str()];
    d.device = id.str();
    NodeCost cost = nodeCost(*n);
    double seconds = 0;
    if (model)
      if (const ClusterDevice *cd = placed.plan().cluster->find(id))
        seconds = model->kernelSeconds(n->op(), cost, *cd);
    d.deviceFlops += cost.flops;
    d.deviceSeconds += seconds;
    if (!isRecomputed(*n))
      continue;
    ++d.nodes;
    d.flops += cost.flops;
    d.seconds += seconds;
  }
  std::vector<DeviceRecompute> out;
  for (auto &[name, d] : devices)
    if (d.nodes)
      out.push_back(d);
  return out;
}

std::vector<std::string> recomputedNodes(const Module &placed) {
  std::vector<std::string> names;
  if (const Graph *g = placed.findGraph("main"))
    for (const Node *n : g->nodes())
      if (isRecomputed(*n))
        names.push_back(n->attrs().getString(kRecomputeOf));
  return names;
}

} // namespace graphc
