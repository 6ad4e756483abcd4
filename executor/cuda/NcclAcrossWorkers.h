//===- NcclAcrossWorkers.h - One NCCL communicator over workers --*- C++ -*-===//
//
// A GPU collective group that spans workers (processes of a multi-worker run)
// sums with one NCCL communicator over every GPU of every worker, its ranks
// laid out worker by worker, then in each worker's device order
// (ncclRankLayout, CollectivePath.h). Creating it is collective over the
// workers, in the same group order on every one:
//
//  1. layoutOf: every worker tells how many of its GPUs the group has, with a
//     hash of their physical GPUs and whether two of its ranks share one
//     (CrossWorkerExchange::gather). A worker whose ranks share a GPU, which
//     NCCL refuses, fails every worker at once. The gathered list is the
//     communicator's key: groups over the same GPUs everywhere share one
//     communicator, and every worker decides that alike.
//  2. create: worker 0 asks NCCL for a unique id (ncclGetUniqueId) and
//     broadcasts its 128 bytes (CrossWorkerExchange::broadcast: MPI, polled
//     against --collective-timeout); a worker 0 that fails sends zeros, so the
//     others fail at once instead of waiting for the timeout. Each worker then
//     issues ncclGroupStart, ncclCommInitRankConfig per local GPU
//     (non-blocking communicators: blocking = 0), ncclGroupEnd, and polls
//     ncclCommGetAsyncError until every communicator is ready, for at most
//     the timeout; on expiry or error it aborts them (ncclCommAbort), and the
//     error names the group, its NCCL ranks and the worker.
//
// Each all-reduce is ncclGroupStart, one ncclAllReduce per tensor,
// ncclGroupEnd, then the same poll until NCCL has enqueued it; an event
// recorded after it lets the device's wait (check(), run by
// CudaDevice::synchronize) abort the communicator when the all-reduce has not
// finished within the timeout, so that a dead or stalled worker never hangs a
// GPU rank. The error names the group, the NCCL rank and the timeout; the
// trainer adds the step and graphrun the MPI rank, and ends every rank.
//
// Flat, not hierarchical: one communicator over all GPUs of all workers, not
// a sum inside each worker followed by one across workers. NCCL finds which
// ranks share a machine and builds its rings with each machine's GPUs as
// neighbours (NVLink or PCIe inside, one network hop in and one out per
// machine) and its trees as trees of machines with chains inside, so a flat
// all-reduce crosses the network no more than a hand-made hierarchy would,
// which would add a step and a second communicator.
//
// Order: NCCL's kernels of one GPU run in the order they are issued on its
// collective stream, so every worker must issue the groups in the same order
// (they do: every worker runs the same plan's towers under the same
// deterministic schedule). That is also why groups may share a communicator.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Collectives.h"
#include "executor/cuda/CollectivePath.h"
#include "executor/cuda/NcclLibrary.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <memory>

namespace graphc {

class NcclAcrossWorkers {
public:
  /// Step 1: the group's layout and its communicator's key (the same on every
  /// worker), or an error on every worker when one has ranks sharing a GPU.
  /// `ordinals`: this worker's physical GPU of each local rank.
  static llvm::Expected<std::pair<NcclRankLayout, std::vector<uint64_t>>>
  layoutOf(CrossWorkerExchange &exchange, llvm::StringRef group, llvm::ArrayRef<int> ordinals);

  /// Step 2: the communicators of this worker's GPUs (by local rank).
  static llvm::Expected<std::unique_ptr<NcclAcrossWorkers>>
  create(const NcclApi &api, CrossWorkerExchange &exchange, llvm::StringRef group,
         const NcclRankLayout &layout, llvm::ArrayRef<int> ordinals);

  /// Destroys the communicators (ncclCommFinalize, then ncclCommDestroy), or
  /// aborts them after a failure or when they do not finish in time.
  ~NcclAcrossWorkers();

  /// Local rank `local` sums `inputs` into `outputs` over every rank of every
  /// worker, on `stream`; returns once NCCL has enqueued it.
  llvm::Error allReduce(unsigned local, llvm::StringRef group, llvm::ArrayRef<TensorView> inputs,
                        llvm::ArrayRef<TensorView> outputs, cudaStream_t stream);
  /// While local rank `local`'s device waits: NCCL's asynchronous error, or
  /// its last all-reduce unfinished after the timeout (the communicator is
  /// then aborted).
  llvm::Error check(unsigned local);
  /// Another device failed: abort rather than destroy at the end.
  void markBroken();

  const NcclRankLayout &layout() const { return layout_; }
  /// "NCCL rank 2 of 5 (worker 1 of 2)".
  std::string describe(unsigned local) const;

private:
  NcclAcrossWorkers(const NcclApi &api, NcclRankLayout layout, std::chrono::milliseconds timeout)
      : api_(api), layout_(std::move(layout)), timeout_(timeout) {}
  struct Local {
    ncclComm_t comm = nullptr; ///< null once aborted
    int ordinal = 0;
    cudaEvent_t done = nullptr; ///< recorded after the last all-reduce
    bool pending = false;
    std::chrono::steady_clock::time_point issued;
    std::string group; ///< of the last all-reduce
  };
  /// Polls until no communicator of `locals` is in progress.
  llvm::Error awaitReady(llvm::ArrayRef<unsigned> locals, llvm::StringRef what);
  void abort(Local &l);

  const NcclApi &api_;
  NcclRankLayout layout_;
  std::chrono::milliseconds timeout_;
  std::vector<Local> locals_;
  std::atomic<bool> broken_{false};
};

} // namespace graphc
