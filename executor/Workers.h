//===- Workers.h - The processes of a multi-worker run (MPI) -----*- C++ -*-===//
//
// A multi-worker run is one process per worker, launched by Open MPI's
// `mpirun`; rank r of MPI_COMM_WORLD is worker r, and rank 0 is the chief
// (the one that prints progress and writes checkpoints and metrics). This is
// the only file of the project that talks to MPI; everything else sees:
//
//  1. Start. Workers::start() initializes MPI (MPI_Init_thread, serialized
//     calls) only when this process was launched by mpirun (Open MPI sets
//     OMPI_COMM_WORLD_SIZE), so a process started by hand stays a world of
//     one and never loads MPI's runtime. current() is that world.
//  2. Rendezvous. agree() compares one value across every rank (a hash of
//     the plan at start-up) and names the ranks that differ.
//  3. Sums across workers. allReduceSum() adds f32 tensors elementwise over
//     the ranks, in place, on an MPI communicator of the caller's group
//     (prepareGroups() creates one per group, in the same order on every
//     rank, so that groups may complete in any order). The executor's CPU
//     collectives call it after reducing inside the worker.
//     GPU groups across workers sum with NCCL instead; their communicators
//     are made through the CrossWorkerExchange side of this class: gather()
//     and broadcast() (NCCL's unique id, from worker 0).
//  4. Parameter-server tasks (passes/PsPart.h). With P ps tasks, the last
//     P ranks serve variables and the first size()-P train: setPsTasks()
//     splits the world so that every collective across workers (sums,
//     agreements, gathers) spans the training ranks only, and exchange() /
//     receiveAny() carry point-to-point messages between workers and tasks
//     on a communicator of their own.
//  5. Never hang. Every collective here is non-blocking (MPI_Iallreduce,
//     MPI_Iallgather, MPI_Ibcast) and polled against a deadline (--collective-timeout):
//     a rank that died or stalled makes the others fail with an error that
//     names this rank, the collective and the step, instead of waiting
//     forever. The tool then ends the whole job (abortAll: MPI_Abort), which
//     also stops a stalled rank; nothing in a library exits.
//  6. A rank that dies. mpirun notices a rank killed (kill -9, the OOM
//     killer) and ends the others with SIGTERM, then SIGKILL. The ranks
//     learn each other's host and pid at the plan's rendezvous; a rank that
//     waits in a collective after a stop signal (watchStop) looks for ranks
//     of its host whose process is gone and, when it finds one, fails the
//     collective at once with an error that names them, so its last words
//     say who died, in which collective and at which step.
//
// MPI calls are serialized by a mutex (MPI_THREAD_SERIALIZED), and waiting
// sleeps between tests, so device threads waiting on the network leave the
// cores to the compute.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Collectives.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace graphc {

class Workers final : public CrossWorkerReducer, public CrossWorkerExchange {
public:
  /// True when Open MPI's mpirun launched this process.
  static bool launchedByMpirun();
  /// Starts MPI when launched by mpirun (once; later calls return the same
  /// world); otherwise the world of one.
  static llvm::Expected<Workers *> start();
  /// The world started, or the world of one.
  static Workers &current();

  ~Workers() override;

  /// A training rank is its worker's index (ps tasks come after them).
  unsigned rank() const override { return rank_; }
  unsigned size() const { return size_; }
  bool chief() const { return rank_ == 0; }
  /// The last `ps` ranks are parameter-server tasks (point 4); every rank
  /// calls it once, with the same value, after the plan's rendezvous.
  llvm::Error setPsTasks(unsigned ps);
  unsigned numPsTasks() const { return ps_; }
  bool isPsTask() const { return rank_ >= numWorkers(); }
  /// MPI is running (even with one rank).
  bool usesMpi() const { return mpi_; }

  /// How long one collective may wait for the other ranks.
  void setTimeout(std::chrono::milliseconds t) { timeout_ = t; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  /// The training step, for messages.
  void setStep(int64_t step) { step_.store(step); }
  /// A stop signal's flag (SIGINT/SIGTERM, non-zero once one came): while
  /// it is set, waiting collectives check whether a rank died (point 6).
  void watchStop(const std::atomic<int> *flag) { stop_ = flag; }
  /// "rank 1 (pid 4242)" for each rank of this host whose process is gone,
  /// joined; empty when none is (or before the rendezvous).
  std::string goneRanks() const;

  /// Every rank passes its `value`; an error on every rank when they differ,
  /// listing each rank's value. `what` names the value.
  llvm::Error agree(uint64_t value, llvm::StringRef what);
  /// Whether any rank passes true (e.g. a stop signal), so that every rank
  /// stops after the same step.
  llvm::Expected<bool> any(bool flag, llvm::StringRef what);
  /// Elementwise logical or of every rank's flags, in place (the same length
  /// on every rank): which samples of a batch failed to load anywhere.
  llvm::Error orFlags(llvm::MutableArrayRef<uint8_t> flags, llvm::StringRef what);
  /// Every training rank's value, in rank order.
  llvm::Expected<std::vector<uint64_t>> gather(uint64_t value, llvm::StringRef what) override;
  /// Rank 0's bytes to every training rank (MPI_Ibcast); the same length on
  /// every rank.
  llvm::Error broadcast(llvm::MutableArrayRef<uint8_t> bytes, llvm::StringRef what) override;
  /// A rendezvous has succeeded: failures from here on end the whole job.
  bool rendezvousDone() const { return rendezvous_; }

  /// The training ranks (every rank without ps tasks).
  unsigned numWorkers() const override { return size_ - ps_; }
  llvm::Error prepareGroups(llvm::ArrayRef<std::string> groups) override;
  llvm::Error allReduceSum(llvm::StringRef group, llvm::ArrayRef<TensorView> tensors,
                           llvm::StringRef what) override;

  /// A point-to-point message: to or from `rank`, `tag` telling kinds
  /// apart; a receive takes at most `bytes` and sets `received`.
  struct Message {
    unsigned rank = 0;
    int tag = 0;
    void *data = nullptr;
    size_t bytes = 0;
    size_t received = 0;
  };
  /// Starts every send and receive, then waits for all of them until the
  /// timeout; `what` names the exchange in errors.
  llvm::Error exchange(llvm::ArrayRef<Message> sends, llvm::MutableArrayRef<Message> receives,
                       llvm::StringRef what);
  /// Receives one message of `tag` from any rank into `into` (its rank and
  /// size set), waiting until `deadline`.
  llvm::Error receiveAny(Message &into, std::chrono::steady_clock::time_point deadline,
                         llvm::StringRef what);

  /// "rank 1 of 4" (for messages; "" in a world of one).
  std::string whoAmI() const;

  /// Ends MPI cleanly (every rank must call it); a no-op without MPI.
  void finish();
  /// Ends every rank of the job with `code` (MPI_Abort); without MPI, exit.
  [[noreturn]] void abortAll(int code);

private:
  Workers() = default;
  struct Comms;
  /// Waits for `n` requests until the deadline; the error names the
  /// collective and the step.
  llvm::Error waitAll(void *requests, int n, llvm::StringRef collective, void *statuses = nullptr,
                      std::chrono::steady_clock::time_point deadline = {});
  /// gather() among every rank (`world`) or the training ranks.
  llvm::Expected<std::vector<uint64_t>> gatherOn(bool world, uint64_t value, llvm::StringRef what);
  /// Learns every rank's pid and host (after the first rendezvous).
  llvm::Error learnPeers();

  unsigned rank_ = 0, size_ = 1, ps_ = 0;
  bool mpi_ = false, finished_ = false, rendezvous_ = false;
  std::chrono::milliseconds timeout_{std::chrono::seconds(60)};
  std::atomic<int64_t> step_{-1};
  const std::atomic<int> *stop_ = nullptr;
  std::vector<uint64_t> pids_, hosts_; ///< per rank of the world
  std::mutex mpiMutex_;
  std::unique_ptr<Comms> comms_;
};

} // namespace graphc
