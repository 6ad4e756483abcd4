//===- MpiCollectives.h - Collectives across workers over MPI ----*- C++ -*-===//
//
// Internal to executor/dist: WorkerCollectives on MPI communicators.
//
//  - Agreements. agree() gathers one value from every rank (ps tasks too:
//    the plan's hash at start-up) and names the ranks that differ; the first
//    success is the run's rendezvous, after which every rank learns the
//    others' host and pid (PeerWatch.h). any() and orFlags() are reductions
//    over the training ranks; meet() is their barrier without a deadline.
//  - Sums across workers. allReduceSum() adds f32 tensors elementwise over
//    the training ranks, in place, on a communicator of the caller's group
//    (prepareGroups() creates one per group, in the same order on every
//    rank, so that groups may complete in any order). The executor's CPU
//    collectives call it after reducing inside the worker.
//  - The NCCL side. GPU groups across workers sum with NCCL instead; their
//    communicators are made through gather() and broadcast() (NCCL's unique
//    id, from worker 0).
// Every call is non-blocking and waited for by MpiWait, against the
// deadline.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/MpiWait.h"
#include "executor/dist/WorkerCollectives.h"

namespace graphc {

class MpiCollectives final : public WorkerCollectives {
public:
  MpiCollectives(MpiSession &mpi, MpiWait &wait, PeerWatch &peers)
      : mpi_(mpi), wait_(wait), peers_(peers) {}

  unsigned numWorkers() const override { return mpi_.numWorkers(); }
  unsigned rank() const override { return mpi_.rank; }
  std::chrono::milliseconds timeout() const override { return wait_.timeout(); }

  llvm::Error agree(uint64_t value, llvm::StringRef what) override;
  bool rendezvousDone() const override { return rendezvous_; }
  llvm::Expected<bool> any(bool flag, llvm::StringRef what) override;
  /// MPI_Ibarrier over the training ranks, waited for without a deadline.
  llvm::Error meet(llvm::StringRef what) override;
  llvm::Error orFlags(llvm::MutableArrayRef<uint8_t> flags, llvm::StringRef what) override;
  /// Every training rank's value, in rank order.
  llvm::Expected<std::vector<uint64_t>> gather(uint64_t value, llvm::StringRef what) override;
  /// Rank 0's bytes to every training rank (MPI_Ibcast).
  llvm::Error broadcast(llvm::MutableArrayRef<uint8_t> bytes, llvm::StringRef what) override;
  llvm::Error prepareGroups(llvm::ArrayRef<std::string> groups) override;
  llvm::Error allReduceSum(llvm::StringRef group, llvm::ArrayRef<TensorView> tensors,
                           llvm::StringRef what) override;

private:
  /// gather() among every rank (`world`) or the training ranks.
  llvm::Expected<std::vector<uint64_t>> gatherOn(bool world, uint64_t value, llvm::StringRef what);
  /// Learns every rank's pid and host (after the first rendezvous).
  llvm::Error learnPeers();

  MpiSession &mpi_;
  MpiWait &wait_;
  PeerWatch &peers_;
  bool rendezvous_ = false;
};

} // namespace graphc
