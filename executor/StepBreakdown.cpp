#include "executor/StepBreakdown.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <set>

namespace graphc {

llvm::StringRef breakdownPartName(BreakdownPart p) {
  switch (p) {
  case BreakdownPart::Kernel:
    return "kernels";
  case BreakdownPart::Collective:
    return "collectives";
  case BreakdownPart::CopyHostToDevice:
    return "copies h2d";
  case BreakdownPart::CopyDeviceToDevice:
    return "copies d2d";
  case BreakdownPart::CopyDeviceToHost:
    return "copies d2h";
  case BreakdownPart::Wait:
    return "waits";
  case BreakdownPart::Host:
    return "host";
  case BreakdownPart::LaunchGap:
    return "launch gaps";
  case BreakdownPart::Other:
    return "other";
  }
  return "other";
}

std::vector<Segment> resolveTimeline(llvm::ArrayRef<Activity> activities, double startUs,
                                     double endUs) {
  struct Edge {
    double t;
    bool start;
    unsigned index;
  };
  std::vector<Edge> edges;
  std::vector<double> clippedStart(activities.size());
  for (unsigned i = 0; i < activities.size(); ++i) {
    const Activity &a = activities[i];
    assert(a.part != BreakdownPart::Other && "Other is what no interval covers");
    double s = std::max(a.startUs, startUs), e = std::min(a.endUs, endUs);
    if (!(s < e))
      continue;
    clippedStart[i] = s;
    edges.push_back({s, true, i});
    edges.push_back({e, false, i});
  }
  llvm::sort(edges, [](const Edge &a, const Edge &b) { return a.t < b.t; });
  // Per part, the covering activities by (start, index): the first started
  // names a kernel segment's op.
  std::array<std::set<std::pair<double, unsigned>>, kBreakdownParts> active;
  std::vector<Segment> out;
  size_t k = 0;
  for (double t = startUs; t < endUs;) {
    for (; k < edges.size() && edges[k].t <= t; ++k) {
      const Edge &e = edges[k];
      auto &set = active[(unsigned)activities[e.index].part];
      if (e.start)
        set.insert({clippedStart[e.index], e.index});
      else
        set.erase({clippedStart[e.index], e.index});
    }
    double next = k < edges.size() ? std::min(edges[k].t, endUs) : endUs;
    BreakdownPart part = BreakdownPart::Other;
    llvm::StringRef op;
    for (unsigned p = 0; p < kBreakdownParts; ++p)
      if (!active[p].empty()) {
        part = (BreakdownPart)p;
        op = activities[active[p].begin()->second].op;
        break;
      }
    if (part != BreakdownPart::Kernel)
      op = {};
    if (!out.empty() && out.back().part == part && out.back().op == op)
      out.back().endUs = next;
    else
      out.push_back({t, next, part, op});
    t = next;
  }
  return out;
}

void addStreamWaits(llvm::ArrayRef<StreamOp> ops, std::vector<Activity> &out) {
  double previousEnd = -std::numeric_limits<double>::infinity();
  for (const StreamOp &op : ops) {
    double idleFrom = std::max(previousEnd, op.issuedUs);
    if (op.waited && op.startUs > idleFrom)
      out.push_back({idleFrom, op.startUs, BreakdownPart::Wait});
    previousEnd = std::max(previousEnd, op.endUs);
  }
}

double PartTimes::totalUs() const {
  double sum = 0;
  for (double v : us)
    sum += v;
  return sum;
}

void PartTimes::add(llvm::ArrayRef<Segment> segments) {
  for (const Segment &s : segments) {
    double d = s.endUs - s.startUs;
    us[(unsigned)s.part] += d;
    if (s.part == BreakdownPart::Kernel)
      kernelUsByOp[s.op.empty() ? std::string("(unnamed)") : s.op.str()] += d;
  }
}

PartTimes &PartTimes::operator+=(const PartTimes &o) {
  for (unsigned p = 0; p < kBreakdownParts; ++p)
    us[p] += o.us[p];
  for (const auto &[op, t] : o.kernelUsByOp)
    kernelUsByOp[op] += t;
  return *this;
}

PartTimes PartTimes::scaled(double factor) const {
  PartTimes r = *this;
  for (double &v : r.us)
    v *= factor;
  for (auto &[op, t] : r.kernelUsByOp)
    t *= factor;
  return r;
}

ResolvedRun resolveRun(const RunTimeline &run) {
  ResolvedRun r;
  r.step = run.step;
  r.micro = run.micro;
  r.startUs = run.startUs;
  r.endUs = run.endUs;
  std::vector<Activity> all;
  for (const DeviceActivities &d : run.devices) {
    r.devices.push_back(d.device);
    r.deviceSegments.push_back(resolveTimeline(d.activities, run.startUs, run.endUs));
    llvm::append_range(all, d.activities);
  }
  // The highest part over every device's intervals is the highest over the
  // devices' own parts: the same rule, one level up.
  r.stepSegments = resolveTimeline(all, run.startUs, run.endUs);
  return r;
}

StepBreakdown summarizeRuns(llvm::ArrayRef<ResolvedRun> runs) {
  struct StepTotals {
    uint64_t step;
    PartTimes whole;
    std::map<std::string, PartTimes> devices;
  };
  std::vector<StepTotals> steps;
  for (const ResolvedRun &r : runs) {
    if (steps.empty() || steps.back().step != r.step)
      steps.push_back({r.step, {}, {}});
    StepTotals &s = steps.back();
    s.whole.add(r.stepSegments);
    for (size_t d = 0; d < r.devices.size(); ++d)
      s.devices[r.devices[d]].add(r.deviceSegments[d]);
  }
  StepBreakdown b;
  b.profiledSteps = steps.size();
  if (steps.empty())
    return b;
  size_t first = steps.size() > 1 ? 1 : 0;
  if (first)
    b.firstStepUs = steps.front().whole.totalUs();
  b.averagedSteps = steps.size() - first;
  b.firstAveraged = steps[first].step;
  b.lastAveraged = steps.back().step;
  std::map<std::string, PartTimes> devices;
  for (size_t i = first; i < steps.size(); ++i) {
    b.step += steps[i].whole;
    for (auto &[name, t] : steps[i].devices)
      devices[name] += t;
  }
  const double mean = 1.0 / b.averagedSteps;
  b.step = b.step.scaled(mean);
  for (auto &[name, t] : devices)
    b.devices.push_back({name, t.scaled(mean)});
  return b;
}

} // namespace graphc
