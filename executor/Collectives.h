//===- Collectives.h - All-reduce among host devices -------------*- C++ -*-===//
//
// The project's own reduction for CPU devices (and for logical devices that
// share one physical GPU, where NCCL refuses). Every participant of a group
// calls allReduce from its own device thread with its tensors; the call
// returns when all ranks have arrived and each output holds the elementwise
// sum over ranks. Work is shared: rank r sums the r-th slice of every tensor.
// Sharded optimizer state adds reduceScatter (rank r sums only its piece, in
// the same rank order, so the bits are the all-reduce's) and allGather (rank
// r copies its piece of a variable into every other rank's replica); neither
// crosses workers.
//
// The ranks meet at the rendezvous every engine shares (Rendezvous.h): a
// participant that waits longer than the timeout gets an error naming the
// group, its sequence number, its rank, the ranks that never arrived and the
// tensor shapes, instead of hanging. Mismatched shapes between ranks are an
// error naming both ranks.
//
// A group may also span workers (processes of a multi-worker run). How its
// sum crosses them follows from its members' kind (bindGroup):
//   - host devices: the sum inside the process is then summed across the
//     workers (CrossWorkerReducer; over MPI in executor/dist/) before any
//     rank returns;
//   - GPUs: one NCCL communicator over every GPU of every worker
//     (executor/cuda/NcclAcrossWorkers.h), built through CrossWorkerExchange
//     (the same MPI processes carry NCCL's unique id).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Rendezvous.h"
#include "executor/StepTimes.h"
#include "kernels/Kernel.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <chrono>
#include <memory>
#include <set>

namespace graphc {

class Device;

/// Sums tensors across the workers of a run (executor/dist/MpiCollectives.h
/// implements it over MPI; the collectives see only this).
class CrossWorkerReducer {
public:
  virtual ~CrossWorkerReducer() = default;
  /// Number of workers taking part.
  virtual unsigned numWorkers() const = 0;
  /// Creates what the groups need; called once, with the same sorted list on
  /// every rank.
  virtual llvm::Error prepareGroups(llvm::ArrayRef<std::string> groups) = 0;
  /// Replaces every f32 tensor with its elementwise sum over the workers.
  /// `what` names the caller for messages.
  virtual llvm::Error allReduceSum(llvm::StringRef group, llvm::ArrayRef<TensorView> tensors,
                                   llvm::StringRef what) = 0;
};

/// What a GPU group that spans workers needs from the processes to build its
/// NCCL communicator (executor/dist/MpiCollectives.h implements it over MPI;
/// tests over threads). Every call is collective over the workers and bounded by
/// timeout().
class CrossWorkerExchange {
public:
  virtual ~CrossWorkerExchange() = default;
  virtual unsigned numWorkers() const = 0;
  /// This process's worker, 0 .. numWorkers()-1.
  virtual unsigned rank() const = 0;
  /// How long one exchange (and one NCCL call across workers) may wait.
  virtual std::chrono::milliseconds timeout() const = 0;
  /// Every worker's value, in worker order.
  virtual llvm::Expected<std::vector<uint64_t>> gather(uint64_t value, llvm::StringRef what) = 0;
  /// Worker 0's bytes into every worker's `bytes` (the same length on every
  /// worker).
  virtual llvm::Error broadcast(llvm::MutableArrayRef<uint8_t> bytes, llvm::StringRef what) = 0;
};

/// How the executor binds one collective group, from its members' device
/// kinds and the workers it spans (its AllReduce nodes' `workers`).
enum class AcrossWorkers {
  No,   ///< inside this process only
  Mpi,  ///< host devices: the CPU engine's sum, then MPI across the workers
  Nccl, ///< GPUs: one NCCL communicator over every GPU of every worker
};
struct GroupBinding {
  DeviceKind engine = DeviceKind::CPU; ///< the CPU engine or the CUDA backend's
  AcrossWorkers across = AcrossWorkers::No;
};
/// Refuses a group mixing host and GPU devices, and a group across workers
/// that this run cannot sum (no workers, another number of them, or no
/// exchange for GPUs); the error names the group.
llvm::Expected<GroupBinding> bindGroup(llvm::StringRef group, llvm::ArrayRef<DeviceKind> members,
                                       int64_t workers, const CrossWorkerReducer *host,
                                       const CrossWorkerExchange *gpu);

/// Sums tensors across the devices of a group. Each participant calls
/// allReduce from its own device thread; on devices with streams the call may
/// only enqueue the work (NCCL), on host devices it completes it.
class CollectiveEngine {
public:
  virtual ~CollectiveEngine() = default;
  /// Sums `inputs` elementwise over the `nranks` participants of `group` into
  /// `outputs` (same shapes; f32). `what` names the caller for messages.
  virtual llvm::Error allReduce(llvm::StringRef group, unsigned rank, unsigned nranks,
                                llvm::ArrayRef<TensorView> inputs,
                                llvm::ArrayRef<TensorView> outputs, llvm::StringRef what,
                                Device &device) = 0;
  /// Sharded optimizer state (ir/Shards.h): `outputs[i]` of rank r gets
  /// piece r of the sum of `inputs[i]` over the ranks, flattened. An engine
  /// without it refuses, naming the group.
  virtual llvm::Error reduceScatter(llvm::StringRef group, unsigned rank, unsigned nranks,
                                    llvm::ArrayRef<TensorView> inputs,
                                    llvm::ArrayRef<TensorView> outputs, llvm::StringRef what,
                                    Device &device);
  /// In place: piece r of rank r's `whole` (ir/Shards.h) into every rank's
  /// `whole`, so that all hold every rank's piece.
  virtual llvm::Error allGather(llvm::StringRef group, unsigned rank, unsigned nranks,
                                const TensorView &whole, llvm::StringRef what, Device &device);
  /// Wakes every waiting participant with an error (another device failed).
  virtual void abort() = 0;
  /// Before each step.
  virtual void reset() = 0;
};

/// The host engine: every rank meets the others at the rendezvous, sums its
/// slice of every tensor into every rank's outputs, and the last rank to
/// finish its slice completes the call (the sum across workers, where the
/// group spans them) before any rank returns.
class CpuCollectives : public CollectiveEngine {
public:
  /// `clock` (optional) is told when a sum across workers runs.
  explicit CpuCollectives(std::chrono::milliseconds timeout, StepClock *clock = nullptr)
      : rendezvous_(timeout), clock_(clock) {}

  /// The groups (AllReduce nodes with `workers`) whose sum inside this
  /// process is then summed across the workers by `across`: the last rank to
  /// finish its slice does that, and every rank's outputs get the result.
  void reduceAcrossWorkers(CrossWorkerReducer *across, llvm::ArrayRef<std::string> groups);

  llvm::Error allReduce(llvm::StringRef group, unsigned rank, unsigned nranks,
                        llvm::ArrayRef<TensorView> inputs, llvm::ArrayRef<TensorView> outputs,
                        llvm::StringRef what, Device &device) override;
  /// Each rank sums its own pieces, in rank order (the all-reduce's order).
  llvm::Error reduceScatter(llvm::StringRef group, unsigned rank, unsigned nranks,
                            llvm::ArrayRef<TensorView> inputs, llvm::ArrayRef<TensorView> outputs,
                            llvm::StringRef what, Device &device) override;
  /// Each rank copies its piece into the other ranks' tensors.
  llvm::Error allGather(llvm::StringRef group, unsigned rank, unsigned nranks,
                        const TensorView &whole, llvm::StringRef what, Device &device) override;
  void abort() override;
  void reset() override;

private:
  /// Meets the other ranks, runs this rank's share, and returns once every
  /// rank has run its share (they read and write each other's tensors).
  llvm::Error meet(llvm::StringRef group, unsigned rank, unsigned nranks, RendezvousArrival arrival,
                   llvm::StringRef what, llvm::function_ref<void(const RendezvousMeeting &)> share,
                   bool acrossWorkers);
  /// The last rank's part: the sum across workers (where the group spans
  /// them) into every rank's outputs.
  llvm::Error complete(llvm::StringRef group, const RendezvousMeeting &m, llvm::StringRef what);

  Rendezvous rendezvous_;
  StepClock *clock_;
  CrossWorkerReducer *across_ = nullptr;
  std::set<std::string, std::less<>> acrossGroups_;
};

} // namespace graphc
