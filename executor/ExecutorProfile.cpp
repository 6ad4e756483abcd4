//===- ExecutorProfile.cpp - What a profiled run records ------------------===//
//
// With ExecutorOptions::profile, each run leaves: every node's time (the
// per-op profile), trace events on its device's tracks, and the intervals
// of the step breakdown (StepBreakdown.h). The intervals per device are:
//
//   - its timed work: kernels, copies (with their route), collectives, from
//     the device's LaunchTimings (CUDA events on a GPU, the worker's clock
//     on a CPU device);
//   - waits: the worker blocked on another device's node (or a CPU device
//     on the cores another device holds), and, on a GPU, a stream idle
//     between an operation's issue and its start when that operation was
//     made to wait for an event (addStreamWaits);
//   - the host's own work around the device's: from the run's start (feeds
//     checked and copied in) to the worker's start, and from the step's
//     devices all done to the run's end (outputs read back) — host; the
//     worker collecting its timings — host;
//   - the worker issuing (launch gap where nothing else covers it), from its
//     start until synchronize returns;
//   - done early: from the worker's end until every device is done — wait.
//
// So the intervals cover every run from its start to its end and nothing is
// left to "other". Where a GPU's events sit on the host's clock is good to
// the anchoring (tens of microseconds): an error there moves time between
// parts (a wait or launch gap against the operation next to it), never
// out of the step.
//
//===----------------------------------------------------------------------===//

#include "executor/Executor.h"

#include "executor/ExecutorImpl.h"

#include <cmath>
#include <map>

namespace graphc {

using namespace exec;

namespace {

BreakdownPart partOf(const LaunchTiming &t) {
  switch (t.kind) {
  case EventKind::Compute:
    return BreakdownPart::Kernel;
  case EventKind::Collective:
    return BreakdownPart::Collective;
  case EventKind::Wait:
    return BreakdownPart::Wait;
  case EventKind::Copy:
  case EventKind::Input:
    break;
  }
  switch (t.route) {
  case CopyRoute::HostToDevice:
    return BreakdownPart::CopyHostToDevice;
  case CopyRoute::DeviceToHost:
    return BreakdownPart::CopyDeviceToHost;
  case CopyRoute::DeviceToDevice:
    break;
  }
  return BreakdownPart::CopyDeviceToDevice;
}

bool isCopy(EventKind k) {
  return k == EventKind::Copy || k == EventKind::Input;
}

} // namespace

void ExecutorImpl::collectTimings(DeviceState &d, int micro) {
  std::vector<LaunchTiming> timings = d.device->takeTimings();
  llvm::append_range(timings, d.hostTimings);
  d.hostTimings.clear();
  // Per trace stream, the operations a device queued (issuedUs >= 0), in
  // issue order: their waits are found below.
  std::map<unsigned, std::vector<StreamOp>> queued;
  for (const LaunchTiming &t : timings) {
    NodeExec &e = *nodes[t.node];
    unsigned track = t.stream >= 0 && (size_t)t.stream < d.tracks.size()
                         ? d.tracks[t.stream]
                         : (t.kind == EventKind::Copy ? d.copyTrack : d.computeTrack);
    const double endUs = t.startUs + t.durationUs;
    if (t.kind == EventKind::Wait) {
      // Before the node ran (a CPU device waiting for cores): not its time.
      trace.record(track, {"cores for " + e.node->name(), "wait", EventKind::Wait, step, t.startUs,
                           t.durationUs, micro});
      d.activities.push_back({t.startUs, endUs, BreakdownPart::Wait});
      continue;
    }
    // A fused group's launch: each member gets an equal share.
    llvm::ArrayRef<unsigned> members = e.fusedGroup;
    if (members.empty())
      members = llvm::ArrayRef<unsigned>(t.node);
    for (unsigned m : members) {
      nodes[m]->seconds += t.durationUs * 1e-6 / members.size();
      ++nodes[m]->runs;
    }
    std::string name = e.node->name();
    if (members.size() > 1)
      name += " (+" + std::to_string(members.size() - 1) + " fused)";
    TraceEvent event{name, opName(e.node->op()).str(), t.kind, step, t.startUs, t.durationUs,
                     micro};
    if (isCopy(t.kind))
      event.route = t.route;
    trace.record(track, std::move(event));
    BreakdownPart part = partOf(t);
    d.activities.push_back(
        {t.startUs, endUs, part, part == BreakdownPart::Kernel ? opName(e.node->op()) : ""});
    if (t.issuedUs >= 0)
      queued[track].push_back({t.startUs, endUs, t.issuedUs, t.waited});
  }
  for (auto &[track, ops] : queued) {
    size_t first = d.activities.size();
    addStreamWaits(ops, d.activities);
    for (size_t i = first; i < d.activities.size(); ++i) {
      const Activity &a = d.activities[i];
      trace.record(track, {"stream wait", "wait", EventKind::Wait, step, a.startUs,
                           a.endUs - a.startUs, micro});
    }
  }
}

void ExecutorImpl::noteWait(DeviceState &d, const NodeExec &pred, double startUs, int micro) {
  double waited = trace.nowUs() - startUs;
  if (waited <= 1)
    return;
  trace.record(d.computeTrack,
               {pred.node->name(), "wait", EventKind::Wait, step, startUs, waited, micro});
  d.activities.push_back({startUs, startUs + waited, BreakdownPart::Wait});
}

void ExecutorImpl::noteHostCopy(unsigned device, const std::string &name, llvm::StringRef op,
                                  CopyRoute route, double startUs, int micro) {
  DeviceState &d = *devices[device];
  double endUs = trace.nowUs();
  TraceEvent event{name, op.str(), EventKind::Input, step, startUs, endUs - startUs, micro};
  if (route != CopyRoute::HostToDevice)
    event.kind = EventKind::Copy;
  event.route = route;
  trace.record(d.copyTrack, std::move(event));
  d.activities.push_back({startUs, endUs,
                          route == CopyRoute::HostToDevice ? BreakdownPart::CopyHostToDevice
                                                           : BreakdownPart::CopyDeviceToHost});
}

void ExecutorImpl::startRunTimeline() {
  for (auto &d : devices) {
    d->activities.clear();
    // A run whose workers do not run (a replayed CUDA graph, which
    // profiling refuses) leaves them unset: their intervals are dropped.
    d->workerStartUs = d->syncedUs = d->workerEndUs = std::nan("");
  }
}

void ExecutorImpl::recordRunTimeline(int micro, double startUs, double devicesDoneUs) {
  RunTimeline run;
  run.step = step;
  run.micro = micro;
  run.startUs = startUs;
  run.endUs = trace.nowUs();
  for (auto &d : devices) {
    std::vector<Activity> a = std::move(d->activities);
    d->activities.clear();
    a.push_back({startUs, d->workerStartUs, BreakdownPart::Host});
    a.push_back({d->workerStartUs, d->syncedUs, BreakdownPart::LaunchGap});
    a.push_back({d->syncedUs, d->workerEndUs, BreakdownPart::Host});
    a.push_back({d->workerEndUs, devicesDoneUs, BreakdownPart::Wait});
    a.push_back({devicesDoneUs, run.endUs, BreakdownPart::Host});
    run.devices.push_back({d->traceName, std::move(a)});
  }
  trace.recordRun(std::move(run));
}

} // namespace graphc
