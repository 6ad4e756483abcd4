//===- StepCounterSync.h - Keeping a device's step counter current -*- C++ -*-===//
//
// A GPU device keeps the step counter in its own memory (kernels/DeviceStep.h)
// for the kernels that derive per-step values there, and the counter must
// hold a step's number while that step's kernels run, whether the step is
// issued from the host or replayed from a CUDA graph that the host cannot
// change:
//   1. The issue of every step ends with a kernel that advances the counter
//      (step + 1) on the compute stream, after the step's kernels; a graph
//      captured from a step holds that kernel, so every replay advances it.
//   2. Before a step (issued, captured or replayed) the device compares the
//      step it is about to run with what the counter will hold once the work
//      issued so far has run, and only where they differ enqueues a kernel
//      that sets it: the first step, a step counter moved by
//      Executor::setStep (a resumed run), a run of another graph (gradient
//      accumulation's micro-steps keep the step and move the micro-step).
//      That kernel is enqueued before a capture begins, never inside one, so
//      a graph never holds a fixed step.
// In a run that replays a graph every step, (2) finds nothing to set: the
// host does no work for the counter at all.
//
// StepCounterSync is the host's half of this, without CUDA (tested in
// cuda_plan_tests); CudaDevice issues the kernels (StepCounter.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/DeviceStep.h"

#include <optional>

namespace graphc {

class StepCounterSync {
public:
  /// Before a step that must see `want`: the value to set first, or none
  /// when the counter will hold it already. Afterwards the counter is known
  /// to hold `want`.
  std::optional<DeviceStep> before(DeviceStep want) {
    if (known_ && *known_ == want)
      return std::nullopt;
    known_ = want;
    return want;
  }
  /// An advance that will run was issued (an eager step's end), or ran (a
  /// replayed graph). A captured step's advance runs only when the graph is
  /// replayed: it is not counted when captured.
  void advanced() {
    if (known_)
      ++known_->step;
  }
  /// What the counter will hold, when known.
  std::optional<DeviceStep> known() const { return known_; }

private:
  std::optional<DeviceStep> known_;
};

} // namespace graphc
