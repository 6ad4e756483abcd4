//===- CudaCollectives.h - All-reduce among GPU devices ----------*- C++ -*-===//
//
// The collective engine for groups whose members are all CUDA devices. Each
// group gets a path at bind time (CollectivePath.h): NCCL where every rank
// has its own GPU, the project's own reduction kernel (SumRanks.h) where
// ranks share a GPU, and NCCL over every GPU of every worker where the group
// spans workers (NcclAcrossWorkers.h).
//
// Every call is enqueued on the rank's collective stream, after the hazard
// waits of its device (the inputs are ready, the outputs' bytes are free),
// and the ranks' issuing threads meet on the host first (the rendezvous
// every engine shares, executor/Rendezvous.h): a
// missing rank or mismatched tensors is an error naming the group, the call's
// sequence number, the rank, the missing ranks and the shapes, within the
// executor's wait timeout, instead of a GPU that never finishes. No call
// waits for GPU work on the host.
//
//   NCCL: ncclGroupStart, one ncclAllReduce per tensor of the call (a bucket
//     is one grouped launch), ncclGroupEnd. One communicator set per ordered
//     list of GPUs (ncclCommInitAll at bind), shared by the groups on it.
//     NCCL's asynchronous errors end a device's synchronize with an error.
//   NCCL across workers: the same calls on non-blocking communicators made
//     with ncclCommInitRankConfig, one set per layout (shared by the groups
//     on the same GPUs of every worker); an all-reduce unfinished after
//     --collective-timeout also ends the synchronize, aborting its
//     communicator.
//   Own kernel: every rank records "ready" on its collective stream; rank 0
//     waits for all ranks' ready events, sums into every rank's outputs, and
//     records "done"; the others wait for done on their collective streams,
//     so their later work that reuses the inputs' or outputs' bytes comes
//     after the sum.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Collectives.h"
#include "executor/cuda/CollectivePath.h"
#include "executor/cuda/NcclAcrossWorkers.h"
#include "executor/cuda/NcclLibrary.h"
#include "executor/Rendezvous.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <map>
#include <set>

namespace graphc {

class CudaDevice;

class CudaCollectives : public CollectiveEngine {
public:
  /// `groups`: each group's devices by rank; those in `acrossWorkers` also
  /// span the other workers' GPUs (their communicators made through
  /// `exchange`, collectively: every worker binds the same groups).
  static llvm::Expected<std::unique_ptr<CudaCollectives>>
  create(std::chrono::milliseconds timeout,
         const std::map<std::string, std::vector<CudaDevice *>> &groups,
         const std::set<std::string> &acrossWorkers = {}, CrossWorkerExchange *exchange = nullptr);
  ~CudaCollectives() override;

  llvm::Error allReduce(llvm::StringRef group, unsigned rank, unsigned nranks,
                        llvm::ArrayRef<TensorView> inputs, llvm::ArrayRef<TensorView> outputs,
                        llvm::StringRef what, Device &device) override;
  /// Sharded optimizer state, NCCL path only (others refuse): pieces that
  /// divide evenly are ncclReduceScatter / ncclAllGather (in place); uneven
  /// ones one ncclReduce / ncclBroadcast per rank's piece, in one group.
  llvm::Error reduceScatter(llvm::StringRef group, unsigned rank, unsigned nranks,
                            llvm::ArrayRef<TensorView> inputs, llvm::ArrayRef<TensorView> outputs,
                            llvm::StringRef what, Device &device) override;
  llvm::Error allGather(llvm::StringRef group, unsigned rank, unsigned nranks,
                        const TensorView &whole, llvm::StringRef what, Device &device) override;
  void abort() override;
  void reset() override;

  /// The path chosen for a group (tests, run plans).
  CollectivePath path(llvm::StringRef group) const;

private:
  explicit CudaCollectives(std::chrono::milliseconds timeout) : rendezvous_(timeout) {}
  struct Group {
    CollectivePath path = CollectivePath::SharedGpu;
    std::vector<CudaDevice *> devices;
    std::vector<ncclComm_t> comms;        ///< by rank (NCCL path)
    NcclAcrossWorkers *workers = nullptr; ///< NCCL across workers
  };
  /// A rank's part of one own-kernel call.
  struct Token {
    CudaDevice *device = nullptr;
    cudaEvent_t ready = nullptr, done = nullptr;
  };
  /// The NCCL path across workers: the group's communicators.
  llvm::Error bindAcrossWorkers(llvm::StringRef name, Group &g, CrossWorkerExchange &exchange,
                                llvm::ArrayRef<int> ordinals);
  llvm::Error ncclAllReduce(Group &g, unsigned rank, llvm::ArrayRef<TensorView> inputs,
                            llvm::ArrayRef<TensorView> outputs, cudaStream_t stream);
  llvm::Error ownAllReduce(llvm::StringRef name, const RendezvousMeeting &m, unsigned rank,
                           cudaStream_t stream, Token &mine);
  Token *newToken(CudaDevice &d);
  /// The group bound as `group` and rank `rank`'s device in it; an error
  /// names the call (`what`) when either is not.
  llvm::Expected<std::pair<Group *, CudaDevice *>> member(llvm::StringRef group, unsigned rank,
                                                          llvm::StringRef what, Device &device);
  /// After a call: leaves the rendezvous and ends the device's operation; a
  /// failed call's error names its group, call and rank.
  llvm::Error finish(llvm::StringRef group, uint64_t sequence, unsigned rank, llvm::Error err,
                     CudaDevice &d);
  /// A sharded call on the NCCL path: checks the group and rank, meets the
  /// other ranks' threads, and enqueues `enqueue` on the collective stream.
  llvm::Error shardedCall(llvm::StringRef group, unsigned rank, unsigned nranks,
                          llvm::ArrayRef<TensorView> reads, llvm::ArrayRef<TensorView> writes,
                          llvm::StringRef what, Device &device, llvm::StringRef op,
                          llvm::function_ref<llvm::Error(ncclComm_t, cudaStream_t)> enqueue);

  Rendezvous rendezvous_;
  std::map<std::string, Group> groups_;
  std::map<std::vector<int>, std::vector<ncclComm_t>> commSets_;
  /// By NcclAcrossWorkers::layoutOf's key.
  std::map<std::vector<uint64_t>, std::unique_ptr<NcclAcrossWorkers>> workerComms_;
  const NcclApi *nccl_ = nullptr;
  std::atomic<bool> broken_{false};
  std::mutex tokensMutex_;
  std::vector<std::unique_ptr<Token>> tokens_; ///< this step's; freed at reset
};

} // namespace graphc
