//===- Trace.h - Timeline events and Chrome/Perfetto traces ------*- C++ -*-===//
//
// Each device (and each of its streams) is a track; events are kernels,
// copies, collectives and waits with start and duration in microseconds since
// the recorder started. Each track is written by one thread only, so
// recording takes no lock. writeChromeTrace emits the JSON array format that
// chrome://tracing and ui.perfetto.dev open; summarize() gives per-step time
// in compute, communication, input and waiting, per device. Under gradient
// accumulation a step is an update: its micro-steps' events carry their
// micro-step (args "micro_step") and count towards the step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <string>
#include <vector>

namespace graphc {

enum class EventKind : unsigned char { Compute, Copy, Collective, Wait, Input };
llvm::StringRef eventKindName(EventKind k);

struct TraceEvent {
  std::string name; ///< node name
  std::string op;
  EventKind kind;
  uint64_t step;
  double startUs, durationUs;
  /// Gradient accumulation: the micro-step (a run of graph "micro") it
  /// belongs to; -1 for the step's run of main.
  int micro = -1;
};

struct TraceTrack {
  std::string device; ///< "cpu:0", "gpu:1"
  std::string stream; ///< "compute", "copy", "host"
  std::vector<TraceEvent> events;
};

struct TimeBreakdown {
  std::string device;
  double computeUs = 0, communicationUs = 0, inputUs = 0, waitUs = 0, idleUs = 0, stepUs = 0;
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
  /// Wall-clock span of each step, recorded by the step's driver; `micro`
  /// >= 0 for a micro-step of gradient accumulation (a part of step `step`).
  void recordStep(uint64_t step, double startUs, double durationUs, int micro = -1);
  void clear();

  const std::vector<TraceTrack> &tracks() const { return tracks_; }
  void writeChromeTrace(llvm::raw_ostream &os) const;
  llvm::Error writeChromeTraceFile(llvm::StringRef path) const;
  /// Averages over the recorded steps, one row per device.
  std::vector<TimeBreakdown> summarize() const;

private:
  std::chrono::steady_clock::time_point origin_;
  std::vector<TraceTrack> tracks_;
  struct Span {
    uint64_t step;
    double startUs, durationUs;
    int micro;
  };
  std::vector<Span> steps_;
};

} // namespace graphc
