#include "placement/analysis/PipelineBubble.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <limits>

namespace graphc {

std::optional<PipelineBubble> pipelineBubble(const Module &plan, const SimResult &r) {
  const PlanInfo &p = plan.plan();
  if (p.strategy != Strategy::Pipeline || !p.pipelineStages || !p.microBatches)
    return std::nullopt;
  PipelineBubble b;
  b.stages = (unsigned)*p.pipelineStages;
  b.microBatches = (unsigned)*p.microBatches;
  b.pipelines = (unsigned)p.pipelines.value_or(1);
  b.theory = theoreticalBubble(b.stages, b.microBatches);
  // The span: the towers' kernels; the stages: the devices that run them.
  double first = std::numeric_limits<double>::infinity(), last = 0;
  llvm::StringMap<double> busy;
  for (const SimStep &s : r.timeline)
    if (s.node->tower() >= 0 && s.kind == "compute") {
      first = std::min(first, s.start);
      last = std::max(last, s.end);
      busy[s.device] = 0;
    }
  // Busy: every kernel of a stage's device within the span (the sums of
  // the micro-batches' gradients too).
  for (const SimStep &s : r.timeline)
    if (s.kind == "compute" && busy.count(s.device))
      busy[s.device] += std::max(0.0, std::min(s.end, last) - std::max(s.start, first));
  if (busy.empty() || last <= first)
    return std::nullopt;
  double total = 0;
  for (const auto &entry : busy)
    total += entry.second;
  b.spanSeconds = last - first;
  b.bubble = 1 - total / (double)busy.size() / b.spanSeconds;
  return b;
}

} // namespace graphc
