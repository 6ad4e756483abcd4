//===- Rendezvous.h - Where a collective's ranks meet on the host -*- C++ -*-===//
//
// Before a GPU collective is enqueued, the issuing threads of its ranks meet
// here, so that a missing rank or mismatched tensors become an error instead
// of a GPU that waits forever (NCCL hangs on a missing peer and corrupts on a
// count mismatch). The meeting only orders issuing threads; no GPU work is
// waited for, so the host still runs ahead of the streams.
//
// Each rank numbers its own calls per group (0, 1, 2, ...); call #s of every
// rank meet in one record, so a rank that is done with call #s may arrive for
// #s+1 while a slower rank still reads #s. Contract (the same as
// CpuCollectives):
//   - arrive() returns every rank's arrival once all nranks have arrived; a
//     rank that waits longer than the timeout gets an error naming the group,
//     the sequence number, its rank, the ranks not arrived and its tensors;
//   - tensors must be f32 and the same shapes on every rank (an error names
//     both ranks and their shapes);
//   - the leader (rank 0) may publish one value per call (an event) that the
//     others await, with the same timeout;
//   - abort() wakes every waiter with an error that says another device
//     failed (the executor reports the root cause, not these).
// Pure C++ (no CUDA), so the contract is tested without a GPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

namespace graphc {

struct RendezvousArrival {
  std::vector<TensorView> inputs, outputs;
  std::string caller;    ///< "node 'x' on gpu:1", for messages
  void *token = nullptr; ///< the engine's per-rank data (its device, an event)
};

struct RendezvousMeeting {
  uint64_t sequence = 0;
  std::vector<RendezvousArrival> arrivals; ///< by rank
};

class Rendezvous {
public:
  explicit Rendezvous(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  llvm::Expected<RendezvousMeeting> arrive(llvm::StringRef group, unsigned rank, unsigned nranks,
                                           RendezvousArrival arrival);
  /// The leader's value for call `sequence` of `group`.
  void publish(llvm::StringRef group, uint64_t sequence, void *value);
  /// Waits for the leader's value.
  llvm::Expected<void *> awaitPublished(llvm::StringRef group, uint64_t sequence, unsigned rank);
  /// The rank no longer needs call `sequence`; the record goes when all
  /// left. True for the last rank to leave (it may free the call's tokens).
  bool leave(llvm::StringRef group, uint64_t sequence);

  void abort();
  /// Before each step: forgets unfinished calls (a failed step) and lines
  /// every rank's numbering up again.
  void reset();

private:
  struct Call {
    std::vector<RendezvousArrival> arrivals;
    std::vector<bool> present;
    unsigned arrived = 0, left = 0;
    void *published = nullptr;
    bool hasPublished = false;
  };
  struct Group {
    unsigned nranks = 0;
    std::vector<uint64_t> next; ///< each rank's next call number
    std::map<uint64_t, Call> calls;
  };
  llvm::Error timedOut(const Group &g, const Call &c, llvm::StringRef group, uint64_t seq,
                       unsigned rank, llvm::StringRef phase) const;
  llvm::Error aborted(llvm::StringRef group, uint64_t seq, unsigned rank) const;

  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, Group> groups_;
  bool aborted_ = false;
};

} // namespace graphc
