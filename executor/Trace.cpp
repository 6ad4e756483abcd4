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

unsigned TraceRecorder::addTrack(std::string device, std::string stream) {
  tracks_.push_back({std::move(device), std::move(stream), {}});
  return tracks_.size() - 1;
}

void TraceRecorder::recordStep(uint64_t step, double startUs, double durationUs, int micro) {
  steps_.push_back({step, startUs, durationUs, micro});
}

void TraceRecorder::clear() {
  for (TraceTrack &t : tracks_)
    t.events.clear();
  steps_.clear();
}

void TraceRecorder::writeChromeTrace(llvm::raw_ostream &os) const {
  // Devices are processes, streams are threads: Perfetto groups them so.
  std::map<std::string, int> pid;
  for (const TraceTrack &t : tracks_)
    pid.emplace(t.device, (int)pid.size() + 1);
  llvm::json::Array events;
  for (auto &[device, id] : pid)
    events.push_back(llvm::json::Object{{"name", "process_name"},
                                        {"ph", "M"},
                                        {"pid", id},
                                        {"args", llvm::json::Object{{"name", device}}}});
  for (size_t i = 0; i < tracks_.size(); ++i) {
    const TraceTrack &t = tracks_[i];
    int p = pid[t.device];
    events.push_back(llvm::json::Object{{"name", "thread_name"},
                                        {"ph", "M"},
                                        {"pid", p},
                                        {"tid", (int64_t)i},
                                        {"args", llvm::json::Object{{"name", t.stream}}}});
    for (const TraceEvent &e : t.events) {
      llvm::json::Object args{{"op", e.op}, {"step", (int64_t)e.step}};
      if (e.micro >= 0)
        args["micro_step"] = (int64_t)e.micro;
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
  for (const Span &s : steps_) {
    std::string name = "step ";
    name += std::to_string(s.step);
    if (s.micro >= 0) {
      name += " micro-step ";
      name += std::to_string(s.micro);
    }
    events.push_back(llvm::json::Object{{"name", std::move(name)},
                                        {"cat", "step"},
                                        {"ph", "X"},
                                        {"pid", 0},
                                        {"tid", 0},
                                        {"ts", s.startUs},
                                        {"dur", s.durationUs}});
  }
  os << llvm::json::Value(std::move(events)) << "\n";
}

llvm::Error TraceRecorder::writeChromeTraceFile(llvm::StringRef path) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  writeChromeTrace(os);
  return writeOutputFile(path, os.str());
}

std::vector<TimeBreakdown> TraceRecorder::summarize() const {
  std::map<std::string, TimeBreakdown> byDevice;
  double stepTotal = 0;
  int64_t updates = 0; // micro-steps count towards their step
  for (const Span &s : steps_) {
    stepTotal += s.durationUs;
    updates += s.micro < 0;
  }
  for (const TraceTrack &t : tracks_) {
    TimeBreakdown &b = byDevice[t.device];
    b.device = t.device;
    for (const TraceEvent &e : t.events) {
      switch (e.kind) {
      case EventKind::Compute:
        b.computeUs += e.durationUs;
        break;
      case EventKind::Copy:
      case EventKind::Collective:
        b.communicationUs += e.durationUs;
        break;
      case EventKind::Input:
        b.inputUs += e.durationUs;
        break;
      case EventKind::Wait:
        b.waitUs += e.durationUs;
        break;
      }
    }
  }
  std::vector<TimeBreakdown> out;
  double steps = updates == 0 ? 1 : (double)updates;
  for (auto &[name, b] : byDevice) {
    TimeBreakdown avg = b;
    avg.computeUs /= steps;
    avg.communicationUs /= steps;
    avg.inputUs /= steps;
    avg.waitUs /= steps;
    avg.stepUs = stepTotal / steps;
    avg.idleUs =
        std::max(0.0, avg.stepUs - avg.computeUs - avg.communicationUs - avg.inputUs - avg.waitUs);
    out.push_back(avg);
  }
  return out;
}

} // namespace graphc
