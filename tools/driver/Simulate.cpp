#include "tools/driver/Simulate.h"

#include "placement/analysis/PipelineBubble.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace graphc {

namespace {

std::string ms(double s) {
  return llvm::formatv("{0:f2}", s * 1e3).str();
}

} // namespace

void printSimulation(const SimResult &r, llvm::raw_ostream &os) {
  os << "  device    kernels  compute ms  copies   comm ms   idle ms  busy\n";
  for (const SimDevice &d : r.devices)
    os << llvm::format("  %-8s %8lld %11s %7lld %9s %9s %4.0f%%\n", d.device.c_str(),
                       (long long)d.kernels, ms(d.computeSeconds).c_str(), (long long)d.copies,
                       ms(d.commSeconds).c_str(), ms(d.idleSeconds(r.stepSeconds)).c_str(),
                       r.stepSeconds > 0 ? 100 * d.computeSeconds / r.stepSeconds : 0.0);
  os << "predicted step " << ms(r.stepSeconds) << " ms\n";
  if (r.criticalPath.empty())
    return;
  // The path's time by device and kind, largest first, then its longest nodes.
  std::map<std::string, double> by;
  for (const SimStep &s : r.criticalPath)
    by[s.device + " " + s.kind.str()] += s.end - s.start;
  std::vector<std::pair<std::string, double>> parts(by.begin(), by.end());
  llvm::stable_sort(parts, [](auto &a, auto &b) { return a.second > b.second; });
  os << "critical path: " << r.criticalPath.size() << " nodes; ";
  for (size_t i = 0; i < parts.size(); ++i)
    os << (i ? ", " : "") << parts[i].first << " " << ms(parts[i].second) << " ms";
  os << "\n";
  std::vector<const SimStep *> longest;
  for (const SimStep &s : r.criticalPath)
    longest.push_back(&s);
  llvm::stable_sort(longest,
                    [](auto *a, auto *b) { return a->end - a->start > b->end - b->start; });
  longest.resize(std::min<size_t>(longest.size(), 5));
  os << "longest on it:";
  for (const SimStep *s : longest)
    os << "\n  " << ms(s->end - s->start) << " ms  " << s->node->name() << " ("
       << opName(s->node->op()) << " on " << s->device << ", from " << ms(s->start) << " ms)";
  os << "\n";
}

llvm::json::Value simulationJson(const SimResult &r) {
  llvm::json::Array devices, path;
  for (const SimDevice &d : r.devices)
    devices.push_back(llvm::json::Object{{"device", d.device},
                                         {"kernels", d.kernels},
                                         {"copies", d.copies},
                                         {"compute_seconds", d.computeSeconds},
                                         {"comm_seconds", d.commSeconds},
                                         {"idle_seconds", d.idleSeconds(r.stepSeconds)}});
  for (const SimStep &s : r.criticalPath)
    path.push_back(llvm::json::Object{{"node", s.node->name()},
                                      {"device", s.device},
                                      {"kind", s.kind},
                                      {"start_seconds", s.start},
                                      {"end_seconds", s.end}});
  return llvm::json::Object{{"step_seconds", r.stepSeconds},
                            {"devices", std::move(devices)},
                            {"critical_path", std::move(path)}};
}

void printPipelineBubble(const Module &plan, const SimResult &r, llvm::raw_ostream &os) {
  std::optional<PipelineBubble> b = pipelineBubble(plan, r);
  if (!b)
    return;
  os << llvm::formatv("pipeline: {0} stages x {1} micro-batches{2}: bubble {3:P1} of the stages' "
                      "time over the {4} ms the micro-batches span; theory (S-1)/(M+S-1) = {5:P1}\n",
                      std::to_string(b->stages), std::to_string(b->microBatches),
                      b->pipelines > 1 ? ", " + std::to_string(b->pipelines) + " pipelines" : "",
                      b->bubble, ms(b->spanSeconds), b->theory);
}

std::optional<llvm::json::Value> pipelineBubbleJson(const Module &plan, const SimResult &r) {
  std::optional<PipelineBubble> b = pipelineBubble(plan, r);
  if (!b)
    return std::nullopt;
  return llvm::json::Value(llvm::json::Object{{"stages", (int64_t)b->stages},
                                              {"micro_batches", (int64_t)b->microBatches},
                                              {"pipelines", (int64_t)b->pipelines},
                                              {"span_seconds", b->spanSeconds},
                                              {"bubble", b->bubble},
                                              {"theory", b->theory}});
}

} // namespace graphc
