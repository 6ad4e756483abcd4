//===- Workers.h - The processes of a run, as the run sees them --*- C++ -*-===//
//
// A multi-worker run is one process per rank, launched by Open MPI's
// `mpirun`; rank 0 is the chief (the one that prints progress and writes
// checkpoints and metrics). With P parameter-server tasks the last P ranks
// serve variables and the first size()-P train (passes/PsPart.h).
//
// The tool creates the world (startWorkers, StartWorkers.h) and passes it down: nothing
// below the tool reaches for a process-wide instance, so a test passes a
// world of one (WorldOfOne.h) or a world of its own. What a run uses of it
// is split by job:
//   - who this process is: rank(), size(), the ps tasks (setPsTasks);
//   - collectives across the workers (WorkerCollectives.h): agreements,
//     sums, gathers, broadcasts; the executor sees them through its own
//     interfaces (executor/Collectives.h);
//   - point-to-point messages between workers and ps tasks
//     (MessageChannel.h), for the parameter-server protocol;
//   - the run's bounds and end: the timeout of every call, the step named in
//     its errors, a stop signal's flag, finish() and abortAll().
// MpiWorkers.h is the world mpirun starts, WorldOfOne.h a process alone.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/MessageChannel.h"
#include "executor/dist/StopFlags.h"
#include "executor/dist/WorkerCollectives.h"

#include "llvm/Support/Error.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace graphc {

class Workers {
public:
  virtual ~Workers() = default;

  /// A training rank is its worker's index (ps tasks come after them).
  virtual unsigned rank() const = 0;
  virtual unsigned size() const = 0;
  virtual unsigned numPsTasks() const = 0;
  /// The training ranks (every rank without ps tasks).
  unsigned numWorkers() const { return size() - numPsTasks(); }
  bool chief() const { return rank() == 0; }
  bool isPsTask() const { return rank() >= numWorkers(); }
  /// The last `ps` ranks are parameter-server tasks; every rank calls it
  /// once, with the same value, after the plan's rendezvous. Collectives
  /// across workers span the training ranks from then on.
  virtual llvm::Error setPsTasks(unsigned ps) = 0;

  virtual WorkerCollectives &collectives() = 0;
  virtual MessageChannel &messages() = 0;

  /// How long one collective or exchange may wait for the other ranks.
  virtual void setTimeout(std::chrono::milliseconds t) = 0;
  /// The training step, for messages.
  virtual void setStep(int64_t step) = 0;
  /// The stop signals' flags: once a signal came, waiting calls check whether a rank died;
  /// once the launcher sent it, every wait fails at once (MpiWait.h).
  virtual void watchStop(const StopFlags *flags) = 0;
  /// "rank 1 of 4" (for messages; "" in a world of one).
  virtual std::string whoAmI() const = 0;
  /// Ends the world cleanly (every rank must call it).
  virtual void finish() = 0;
  /// Ends every rank of the job with `code`; a world of one exits.
  [[noreturn]] virtual void abortAll(int code) = 0;
};

/// The error of a ps task count that leaves no rank to train (`processes`
/// ranks in all), or success.
llvm::Error checkPsTasksFit(unsigned ps, unsigned processes);

} // namespace graphc
