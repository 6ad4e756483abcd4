//===- StepTimes.h - Where a step's wall-clock time goes ---------*- C++ -*-===//
//
// A training step's wall-clock time, split into parts that add up to it:
//
//   input        staging the fed batch: copying the feeds into the devices'
//                input buffers, and transfers of a fed value to the devices
//                that read it;
//   intraWorker  communication inside the process: transfers between its
//                devices and the collectives among them;
//   interWorker  communication between the workers of a multi-worker run:
//                the MPI sums of collectives marked `workers` (and what the
//                trainer adds: parameter-server exchanges, per-step
//                agreements);
//   compute      the rest: kernels, and waiting that is none of the above.
//
// Several device threads run at once, so the parts are of wall time, not of
// thread time: at each moment the step is in the highest of inter-worker,
// intra-worker and input that some thread is in, and in compute when no
// thread is in any. So a collective that overlaps another device's kernels
// counts as communication (the step would be shorter without it only if it
// were on the critical path: this split does not look for one), and the
// parts of a step add up to its duration exactly. Per-thread figures, with
// the critical path visible, are --trace's timeline and --profile's table;
// a profiled step's finer split, per device and by the same kind of rule,
// is the step breakdown (StepBreakdown.h).
//
// On GPUs, transfers and NCCL collectives are enqueued, not waited for: what
// is measured there is the host's time issuing them (the device's time is in
// --profile, from CUDA events). CPU devices (and emulated ones) do their
// copies and collectives on their own threads, so the split is theirs.
//
// The clock takes a lock per transfer or collective (never per kernel); it
// is always on, so --metrics and the summary have the split without
// --profile.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <functional>
#include <mutex>

namespace graphc {

struct StepTimes {
  double compute = 0, input = 0, intraWorker = 0, interWorker = 0; ///< seconds
  double total() const { return compute + input + intraWorker + interWorker; }
  StepTimes &operator+=(const StepTimes &o) {
    compute += o.compute;
    input += o.input;
    intraWorker += o.intraWorker;
    interWorker += o.interWorker;
    return *this;
  }
};

/// In increasing precedence: when threads are in several parts at once, the
/// wall time goes to the highest.
enum class StepPart : unsigned char { Compute, Input, IntraWorker, InterWorker };

class StepClock {
public:
  /// `now` gives seconds on a monotonic clock (tests pass their own).
  explicit StepClock(std::function<double()> now = steadySeconds) : now_(std::move(now)) {}

  /// The step begins: every part back to zero.
  void start();
  /// A thread enters / leaves a part (Compute is what no thread is in, so
  /// neither takes it). Calls nest and may come from any thread.
  void enter(StepPart p);
  void leave(StepPart p);
  /// The step ends; its parts add up to the time since start().
  StepTimes finish();

  /// enter() for the life of the scope; does nothing with a null clock.
  class Scope {
  public:
    Scope(StepClock *clock, StepPart p) : clock_(clock), part_(p) {
      if (clock_)
        clock_->enter(part_);
    }
    ~Scope() {
      if (clock_)
        clock_->leave(part_);
    }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    StepClock *clock_;
    StepPart part_;
  };

  static double steadySeconds();

private:
  /// Gives the time since the last change to the part the step was in.
  void advance();

  std::function<double()> now_;
  std::mutex mutex_;
  std::array<unsigned, 4> active_{};
  std::array<double, 4> seconds_{};
  double last_ = 0;
};

} // namespace graphc
