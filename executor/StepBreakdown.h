//===- StepBreakdown.h - All of a profiled step's time, in parts -*- C++ -*-===//
//
// A profiled step's wall time, per device and for the whole step, split into
// parts a user can act on. The input is what was recorded: intervals on a
// device (its streams, its worker thread, the host working on its behalf),
// each of one kind (an Activity). The rule that makes the parts add up to
// the step exactly: at each instant a device is in the highest-precedence
// part that any of its intervals covering that instant is in, and the whole
// step is in the highest part that any device is in. In decreasing
// precedence:
//
//   Kernel              a kernel runs (its time goes to the op type of the
//                       covering kernel that started first)
//   Collective          an all-reduce runs (on a CPU device this includes
//                       waiting inside it for the other ranks to arrive)
//   CopyHostToDevice    a copy runs: host memory into the device (the fed
//   CopyDeviceToDevice  batch, a transfer from a host device), between
//   CopyDeviceToHost    devices or within one, or device memory back to the
//                       host (a transfer to a host device, the step's outputs)
//   Wait                the device waits for work elsewhere: a stream waits
//                       on an event of another stream or device, a CPU
//                       device's thread blocks on another device (or on the
//                       cores another device holds), or the device has
//                       finished its part of the step while others run
//   Host                the host's own work for the step while the device
//                       is idle: checking and staging the feeds, waking the
//                       device workers, reading the outputs back, collecting
//                       the profile's timings
//   LaunchGap           an interval of this kind marks where the host is
//                       issuing this device's work; idle time there is a
//                       launch gap (the executor's scheduling between
//                       launches, the driver's launch latency)
//   Other               covered by nothing above (nothing recorded explains
//                       it); the executor's intervals cover each run from
//                       its start to its end, so it is zero there unless a
//                       run's workers recorded nothing; always shown
//
// So a copy that overlaps a kernel counts as kernel time (the kernel is
// what the device is busy with), and a stream waiting while another stream
// of its device computes counts as kernel time too: a wait shows only where
// it leaves the whole device idle. Everything here is pure (tested with
// synthetic timelines); the executor records the intervals (docs/cuda.md,
// "Timelines", says where they come from on a GPU).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace graphc {

/// In decreasing precedence (see the file comment).
enum class BreakdownPart : unsigned char {
  Kernel,
  Collective,
  CopyHostToDevice,
  CopyDeviceToDevice,
  CopyDeviceToHost,
  Wait,
  Host,
  LaunchGap,
  Other,
};
constexpr unsigned kBreakdownParts = 9;
/// "kernels", "collectives", "copies h2d", ..., "waits", "host",
/// "launch gaps", "other".
llvm::StringRef breakdownPartName(BreakdownPart p);

/// One recorded interval of a device, microseconds on the trace clock.
struct Activity {
  double startUs, endUs;
  BreakdownPart part; ///< never Other: that is what no interval covers
  /// Kernels: the op type. It must outlive the breakdown (the executor
  /// passes opName's static names).
  llvm::StringRef op = {};
};

/// A maximal run of one part (and, for kernels, one op type).
struct Segment {
  double startUs, endUs;
  BreakdownPart part;
  llvm::StringRef op;
};

/// The device's part at every instant of [startUs, endUs): sorted, disjoint
/// segments that cover the window exactly (none when it is empty).
/// Activities outside the window are clipped to it.
std::vector<Segment> resolveTimeline(llvm::ArrayRef<Activity> activities, double startUs,
                                     double endUs);

/// A timed operation on one GPU stream: when it ran on the device and when
/// the host issued it (both on the trace clock), and whether it was made to
/// wait for an event of another stream or device.
struct StreamOp {
  double startUs, endUs, issuedUs;
  bool waited;
};
/// The stream's waits: an operation that waited and started after both its
/// issue and the end of the stream's previous operation was idle, waiting,
/// from the later of those to its start. An operation that did not wait
/// and started late was held up by its launch: no wait (a launch gap).
/// `ops` are one stream's, in issue order.
void addStreamWaits(llvm::ArrayRef<StreamOp> ops, std::vector<Activity> &out);

/// Time per part (and kernels per op type), microseconds.
struct PartTimes {
  std::array<double, kBreakdownParts> us{};
  std::map<std::string, double> kernelUsByOp; ///< adds up to us[Kernel]
  double totalUs() const;
  double operator[](BreakdownPart p) const { return us[(unsigned)p]; }
  void add(llvm::ArrayRef<Segment> segments);
  PartTimes &operator+=(const PartTimes &o);
  PartTimes scaled(double factor) const;
};

/// A device's recorded intervals in one run.
struct DeviceActivities {
  std::string device;
  std::vector<Activity> activities;
};

/// One run of a graph (a step, or a micro-step of one under gradient
/// accumulation) as recorded: its wall-clock span and every device's
/// intervals.
struct RunTimeline {
  uint64_t step = 0;
  int micro = -1; ///< >= 0: a micro-step of `step`
  double startUs = 0, endUs = 0;
  std::vector<DeviceActivities> devices;
};

/// A run resolved per device and for the whole step.
struct ResolvedRun {
  uint64_t step = 0;
  int micro = -1;
  double startUs = 0, endUs = 0;
  std::vector<std::string> devices;
  std::vector<std::vector<Segment>> deviceSegments; ///< by `devices`
  std::vector<Segment> stepSegments;
};
ResolvedRun resolveRun(const RunTimeline &run);

/// Mean time per step: a step is every run of one step number (its
/// micro-steps and its main run). With several steps, the first (which
/// carries one-time work: kernels' setup, algorithm searches, first
/// touches) is left out of the mean and reported on its own.
struct StepBreakdown {
  unsigned profiledSteps = 0;
  unsigned averagedSteps = 0;
  uint64_t firstAveraged = 0, lastAveraged = 0; ///< step numbers, from 0
  double firstStepUs = 0;                       ///< when left out
  PartTimes step;
  std::vector<std::pair<std::string, PartTimes>> devices; ///< sorted by name
};
StepBreakdown summarizeRuns(llvm::ArrayRef<ResolvedRun> runs);

} // namespace graphc
