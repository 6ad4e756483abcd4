//===- Rendezvous.h - Where a collective's ranks meet on the host -*- C++ -*-===//
//
// The one meeting of every collective engine in a process: the device
// threads of a group's ranks meet here before any rank touches another's
// tensors, so that a missing rank or mismatched tensors become an error
// instead of a thread (or a GPU) that waits forever. The CPU engine
// (Collectives.h) sums on the host once everyone has arrived; the CUDA
// engine (cuda/CudaCollectives.h) only orders its issuing threads here and
// enqueues its work on streams (NCCL hangs on a missing peer and corrupts on
// a count mismatch), so the host still runs ahead of the GPUs.
//
// Each rank numbers its own calls per group (0, 1, 2, ...); call #s of every
// rank meet in one record, so a rank that is done with call #s may arrive for
// #s+1 while a slower rank still reads #s. The contract:
//   - arrive() returns every rank's arrival once all nranks have arrived (a
//     view of the call's record, valid until this rank leave()s); a
//     rank that waits longer than the timeout gets an error naming the group,
//     the sequence number, its rank, the ranks not arrived and its tensors;
//   - tensors must be f32 and the same shapes on every rank, outputs shaped
//     as inputs (an error names both ranks and their shapes);
//   - one rank may publish one value per call that the others await, with
//     the same timeout: the CUDA engine's leader (rank 0) publishes the event
//     its reduction records; the CPU engine's last rank to finish its share
//     (finishShare) publishes once the call's result is complete;
//   - leave() ends a rank's part in a call; the record goes when all left;
//   - abort() wakes every waiter with an error that says another device
//     failed (the executor reports the root cause, not these); reset()
//     before each step forgets unfinished calls and lines the numbering up.
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
  llvm::StringRef kind;  ///< "AllReduce", "ReduceScatter" or "AllGather", for messages
  void *token = nullptr; ///< the engine's per-rank data (its device, an event)
};

struct RendezvousMeeting {
  uint64_t sequence = 0;
  /// By rank: the call's record, not a copy; read it before leave().
  llvm::ArrayRef<RendezvousArrival> arrivals;
};

class Rendezvous {
public:
  explicit Rendezvous(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  llvm::Expected<RendezvousMeeting> arrive(llvm::StringRef group, unsigned rank, unsigned nranks,
                                           RendezvousArrival arrival);
  /// The rank has done its share of call `sequence`: true for the last rank
  /// of the group to say so (it completes the call and publishes).
  bool finishShare(llvm::StringRef group, uint64_t sequence);
  /// The publishing rank's value for call `sequence` of `group`.
  void publish(llvm::StringRef group, uint64_t sequence, void *value);
  /// Waits for the published value; a timeout's error says the rank waited
  /// "for <publisher>".
  llvm::Expected<void *> awaitPublished(llvm::StringRef group, uint64_t sequence, unsigned rank,
                                        llvm::StringRef publisher);
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
    unsigned arrived = 0, finished = 0, left = 0;
    void *published = nullptr;
    bool hasPublished = false;
  };
  struct Group {
    unsigned nranks = 0;
    std::vector<uint64_t> next; ///< each rank's next call number
    std::map<uint64_t, Call> calls;
  };
  /// Every arrival's tensors against rank 0's.
  static llvm::Error checkTensors(const Call &c, llvm::StringRef group, uint64_t seq);
  llvm::Error timedOut(const Group &g, const Call &c, llvm::StringRef group, uint64_t seq,
                       unsigned rank, llvm::StringRef phase) const;
  llvm::Error aborted(llvm::StringRef group, uint64_t seq, unsigned rank) const;
  /// A group some rank has arrived in (groups are never forgotten).
  Group &known(llvm::StringRef group);

  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, Group, std::less<>> groups_;
  bool aborted_ = false;
};

} // namespace graphc
