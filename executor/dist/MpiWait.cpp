//===- MpiWait.cpp - Every MPI call bounded by a deadline -----------------===//

#include "executor/dist/MpiWait.h"

#include "ir/Diagnostics.h"

#include <algorithm>
#include <thread>

namespace graphc {

static llvm::Error goneError(const llvm::Twine &what, const std::string &gone) {
  return makeError(what + " did not complete: " + gone +
                   (gone.find(", ") == std::string::npos ? " is" : " are") +
                   " gone (killed or crashed); mpirun is ending every rank");
}

llvm::Error MpiWait::jobEnding(const llvm::Twine &what) const {
  if (!stop_ || !stop_->byLauncher.load())
    return llvm::Error::success();
  std::string gone = peers_.goneRanks();
  if (!gone.empty())
    return goneError(what, gone);
  return makeError(what + " did not complete: mpirun is ending the job (a rank or a host was "
                          "lost, or mpirun was stopped)");
}

llvm::Error MpiWait::waitAll(MPI_Request *requests, int n, const llvm::Twine &what,
                             MPI_Status *statuses, std::chrono::steady_clock::time_point until) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = until == Clock::time_point{} ? start + timeout_ : until;
  // Test often at first (a collective of small tensors completes in
  // microseconds), then sleep longer between tests, up to 200 us.
  std::chrono::microseconds nap(0);
  auto nextPeerCheck = start;
  for (;;) {
    // The launcher's own stop signal (StopFlags.h): the job is over and nothing will complete.
    // Stop driving MPI: its TCP transport ends this process the moment it reads that a peer
    // on a killed host hung up, before this rank could say where it was.
    if (auto e = jobEnding(what))
      return e;
    int done = 0, rc;
    {
      std::lock_guard<std::mutex> lock(mpi_.mutex);
      rc = MPI_Testall(n, requests, &done, statuses ? statuses : MPI_STATUSES_IGNORE);
    }
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
    if (done)
      return llvm::Error::success();
    // mpirun ends the job with SIGTERM when a rank dies: say which one.
    if (stop_ && stop_->signal.load() != 0 && Clock::now() >= nextPeerCheck) {
      nextPeerCheck = Clock::now() + std::chrono::milliseconds(20);
      std::string gone = peers_.goneRanks();
      if (!gone.empty())
        return goneError(what, gone);
    }
    if (Clock::now() > deadline) {
      // The caller names the step; before the first one, say so.
      const auto waited =
          until == Clock::time_point{}
              ? std::chrono::duration_cast<std::chrono::milliseconds>(deadline - start)
              : timeout_;
      return makeError(
          what + (step_.load() >= 0 ? std::string() : std::string(" at start-up")) +
          " did not complete within " + secondsText(waited) +
          " s: another rank died or stalled (--collective-timeout); ending every rank");
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(std::chrono::microseconds(200), nap + std::chrono::microseconds(10));
  }
}

} // namespace graphc
