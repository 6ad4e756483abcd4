//===- Trace.h - Timeline events and Chrome/Perfetto traces ------*- C++ -*-===//
//
// Each device (and each of its streams) is a track; events are kernels,
// copies, collectives and waits with start and duration in microseconds since
// the recorder started. Each track is written by one thread only, so
// recording takes no lock. Each run of a graph is recorded with its step
// breakdown (StepBreakdown.h: every device's part at every instant of the
// run). writeChromeTrace emits the JSON array format that chrome://tracing
// and ui.perfetto.dev open, with a "breakdown" track per device and one for
// the whole step whose slices are those parts; breakdown() gives the mean
// step's parts, the same figures. Under gradient accumulation a step is an
// update: its micro-steps' events carry their micro-step (args "micro_step")
// and count towards the step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/StepBreakdown.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace graphc {

enum class EventKind : unsigned char { Compute, Copy, Collective, Wait, Input };
llvm::StringRef eventKindName(EventKind k);

/// Where a copy moves bytes: host memory into a device, between devices (or
/// within one), a device's memory back to the host.
enum class CopyRoute : unsigned char { HostToDevice, DeviceToDevice, DeviceToHost };
llvm::StringRef copyRouteName(CopyRoute r); ///< "h2d", "d2d", "d2h"

struct TraceEvent {
  std::string name; ///< node name
  std::string op;
  EventKind kind;
  uint64_t step;
  double startUs, durationUs;
  /// Gradient accumulation: the micro-step (a run of graph "micro") it
  /// belongs to; -1 for the step's run of main.
  int micro = -1;
  /// Copies (and fed inputs): where the bytes went; written as args "route".
  std::optional<CopyRoute> route;
};

struct TraceTrack {
  std::string device; ///< "cpu:0", "gpu:1"
  std::string stream; ///< "compute", "copy", "host"
  std::vector<TraceEvent> events;
};

class TraceRecorder {
public:
  TraceRecorder() : origin_(std::chrono::steady_clock::now()) {}
  /// Adds a track; the index is stable for the recorder's life.
  unsigned addTrack(std::string device, std::string stream);
  double nowUs() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_)
        .count();
  }
  void record(unsigned track, TraceEvent e) { tracks_[track].events.push_back(std::move(e)); }
  /// A run of a graph with its wall-clock span and parts, recorded by the
  /// step's driver; `micro` >= 0 for a micro-step of gradient accumulation
  /// (a part of step `step`).
  void recordRun(RunTimeline run) { runs_.push_back(std::move(run)); }
  void clear();

  const std::vector<TraceTrack> &tracks() const { return tracks_; }
  void writeChromeTrace(llvm::raw_ostream &os) const;
  llvm::Error writeChromeTraceFile(llvm::StringRef path) const;
  const std::vector<RunTimeline> &runs() const { return runs_; }
  /// Every recorded run, resolved (StepBreakdown.h).
  std::vector<ResolvedRun> resolvedRuns() const;
  /// The mean step's parts, per device and for the whole step.
  StepBreakdown breakdown() const { return summarizeRuns(resolvedRuns()); }

private:
  std::chrono::steady_clock::time_point origin_;
  std::vector<TraceTrack> tracks_;
  std::vector<RunTimeline> runs_;
};

} // namespace graphc
