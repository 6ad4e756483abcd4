#include "executor/Trace.h"

#include "ir/OutputFile.h"

#include "llvm/Support/JSON.h"

#include <map>

namespace graphc {

llvm::StringRef eventKindName(EventKind k) {
  switch (k) {
  case EventKind::Compute:
    return "compute";
  case EventKind::Copy:
    return "copy";
  case EventKind::Collective:
    return "collective";
  case EventKind::Wait:
    return "wait";
  case EventKind::Input:
    return "input";
  }
  return "compute";
}

llvm::StringRef copyRouteName(CopyRoute r) {
  switch (r) {
  case CopyRoute::HostToDevice:
    return "h2d";
  case CopyRoute::DeviceToDevice:
    return "d2d";
  case CopyRoute::DeviceToHost:
    return "d2h";
  }
  return "d2d";
}

unsigned TraceRecorder::addTrack(std::string device, std::string stream) {
  tracks_.push_back({std::move(device), std::move(stream), {}});
  return tracks_.size() - 1;
}

std::vector<ResolvedRun> TraceRecorder::resolvedRuns() const {
  std::vector<ResolvedRun> out;
  for (const RunTimeline &r : runs_)
    out.push_back(resolveRun(r));
  return out;
}

void TraceRecorder::clear() {
  for (TraceTrack &t : tracks_)
    t.events.clear();
  runs_.clear();
}

namespace {

/// A run's segments as slices named after their part (kernels: the op
/// type), on one track.
void addBreakdownSlices(llvm::json::Array &events, const ResolvedRun &run,
                        llvm::ArrayRef<Segment> segments, int pid, int64_t tid) {
  for (const Segment &s : segments) {
    llvm::StringRef part = breakdownPartName(s.part);
    llvm::json::Object args{
        {"op", s.op.empty() ? part : s.op}, {"step", (int64_t)run.step}, {"part", part}};
    if (run.micro >= 0)
      args["micro_step"] = (int64_t)run.micro;
    events.push_back(llvm::json::Object{{"name", s.op.empty() ? part : s.op},
                                        {"cat", "breakdown"},
                                        {"ph", "X"},
                                        {"pid", pid},
                                        {"tid", tid},
                                        {"ts", s.startUs},
                                        {"dur", s.endUs - s.startUs},
                                        {"args", std::move(args)}});
  }
}

llvm::json::Object threadName(int pid, int64_t tid, llvm::StringRef name) {
  return llvm::json::Object{{"name", "thread_name"},
                            {"ph", "M"},
                            {"pid", pid},
                            {"tid", tid},
                            {"args", llvm::json::Object{{"name", name}}}};
}

} // namespace

void TraceRecorder::writeChromeTrace(llvm::raw_ostream &os) const {
  // Devices are processes, streams are threads: Perfetto groups them so.
  // The whole step is process 0: its spans, and its breakdown.
  std::map<std::string, int> pid;
  for (const TraceTrack &t : tracks_)
    pid.emplace(t.device, (int)pid.size() + 1);
  llvm::json::Array events;
  events.push_back(llvm::json::Object{{"name", "process_name"},
                                      {"ph", "M"},
                                      {"pid", 0},
                                      {"args", llvm::json::Object{{"name", "step"}}}});
  for (auto &[device, id] : pid)
    events.push_back(llvm::json::Object{{"name", "process_name"},
                                        {"ph", "M"},
                                        {"pid", id},
                                        {"args", llvm::json::Object{{"name", device}}}});
  for (size_t i = 0; i < tracks_.size(); ++i) {
    const TraceTrack &t = tracks_[i];
    int p = pid[t.device];
    events.push_back(threadName(p, (int64_t)i, t.stream));
    for (const TraceEvent &e : t.events) {
      llvm::json::Object args{{"op", e.op}, {"step", (int64_t)e.step}};
      if (e.micro >= 0)
        args["micro_step"] = (int64_t)e.micro;
      if (e.route)
        args["route"] = copyRouteName(*e.route);
      events.push_back(llvm::json::Object{{"name", e.name},
                                          {"cat", eventKindName(e.kind)},
                                          {"ph", "X"},
                                          {"pid", p},
                                          {"tid", (int64_t)i},
                                          {"ts", e.startUs},
                                          {"dur", e.durationUs},
                                          {"args", std::move(args)}});
    }
  }
  // The breakdown tracks come after every stream's (thread ids the tracks
  // do not use).
  const int64_t breakdownTid = (int64_t)tracks_.size();
  events.push_back(threadName(0, 0, "steps"));
  events.push_back(threadName(0, breakdownTid, "breakdown"));
  for (auto &[device, id] : pid)
    events.push_back(threadName(id, breakdownTid, "breakdown"));
  for (const ResolvedRun &r : resolvedRuns()) {
    std::string name = "step ";
    name += std::to_string(r.step);
    if (r.micro >= 0) {
      name += " micro-step ";
      name += std::to_string(r.micro);
    }
    events.push_back(llvm::json::Object{{"name", std::move(name)},
                                        {"cat", "step"},
                                        {"ph", "X"},
                                        {"pid", 0},
                                        {"tid", 0},
                                        {"ts", r.startUs},
                                        {"dur", r.endUs - r.startUs}});
    addBreakdownSlices(events, r, r.stepSegments, 0, breakdownTid);
    for (size_t d = 0; d < r.devices.size(); ++d) {
      auto it = pid.find(r.devices[d]);
      if (it != pid.end())
        addBreakdownSlices(events, r, r.deviceSegments[d], it->second, breakdownTid);
    }
  }
  os << llvm::json::Value(std::move(events)) << "\n";
}

llvm::Error TraceRecorder::writeChromeTraceFile(llvm::StringRef path) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  writeChromeTrace(os);
  return writeOutputFile(path, os.str());
}

} // namespace graphc
