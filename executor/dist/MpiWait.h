//===- MpiWait.h - Every MPI call bounded by a deadline ----------*- C++ -*-===//
//
// Internal to executor/dist. Never hang: every collective and exchange of
// the world is non-blocking (MPI_Iallreduce, MPI_Iallgather, MPI_Ibcast,
// MPI_Isend/Irecv) and waited for here, polled against a deadline
// (--collective-timeout): a rank that died or stalled makes the others fail
// with an error that names this rank's call and the step, instead of
// waiting forever. The tool then ends the whole job (abortAll: MPI_Abort),
// which also stops a stalled rank; nothing in a library exits.
//
// Waiting sleeps between tests (up to 200 us), so device threads waiting on
// the network leave the cores to the compute. After a stop signal the wait
// also asks the PeerWatch whether a rank of this host died, and names it;
// after the launcher's own stop signal (StopFlags.h: mpirun is ending the
// job, a rank or a host is lost) a wait fails at once, naming itself, and no
// longer drives MPI, whose TCP transport would end the process unheard on
// reading that a peer on a killed host hung up.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/MpiSession.h"
#include "executor/dist/PeerWatch.h"
#include "executor/dist/StopFlags.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <chrono>

namespace graphc {

class MpiWait {
public:
  MpiWait(MpiSession &mpi, const PeerWatch &peers) : mpi_(mpi), peers_(peers) {}

  void setTimeout(std::chrono::milliseconds t) { timeout_ = t; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void setStep(int64_t step) { step_.store(step); }
  void watchStop(const StopFlags *flags) { stop_ = flags; }

  /// Fails, naming `what`, once the launcher's stop signal came: every MPI call checks it
  /// before it starts, since the job is over and Open MPI's TCP transport may end the process
  /// unheard inside any call that reads a dead peer's hang-up.
  llvm::Error jobEnding(const llvm::Twine &what) const;

  /// Waits for `n` requests (their statuses into `statuses` when given)
  /// until `deadline`, by default the timeout from now. The error names
  /// `what` (built only then), and the step; a deadline the caller set is the timeout counted
  /// from a silent peer's last message (which the caller names).
  llvm::Error waitAll(MPI_Request *requests, int n, const llvm::Twine &what,
                      MPI_Status *statuses = nullptr,
                      std::chrono::steady_clock::time_point deadline = {});

private:
  MpiSession &mpi_;
  const PeerWatch &peers_;
  std::chrono::milliseconds timeout_{std::chrono::seconds(60)};
  std::atomic<int64_t> step_{-1};
  const StopFlags *stop_ = nullptr;
};

} // namespace graphc
