//===- Collectives.h - All-reduce among host devices -------------*- C++ -*-===//
//
// The project's own reduction for CPU devices (and for logical devices that
// share one physical GPU, where NCCL refuses). Every participant of a group
// calls allReduce from its own device thread with its tensors; the call
// returns when all ranks have arrived and each output holds the elementwise
// sum over ranks. Work is shared: rank r sums the r-th slice of every tensor.
//
// A participant that waits longer than the timeout gets an error naming the
// group, its sequence number, its rank, the ranks that never arrived and the
// tensor shapes, instead of hanging. Mismatched shapes between ranks are an
// error naming both ranks.
//
// A group may also span workers (processes of a multi-worker run): its sum
// inside the process is then summed across the workers (CrossWorkerReducer,
// MPI in executor/Workers.h) before any rank returns.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace graphc {

class Device;

/// Sums tensors across the workers of a run (executor/Workers.h implements it
/// over MPI; the collectives see only this).
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
  /// Wakes every waiting participant with an error (another device failed).
  virtual void abort() = 0;
  /// Before each step.
  virtual void reset() = 0;
};

class CpuCollectives : public CollectiveEngine {
public:
  explicit CpuCollectives(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  /// The groups (AllReduce nodes with `workers`) whose sum inside this
  /// process is then summed across the workers by `across`: the last rank to
  /// finish its slice does that, and every rank's outputs get the result.
  void reduceAcrossWorkers(CrossWorkerReducer *across, llvm::ArrayRef<std::string> groups);

  llvm::Error allReduce(llvm::StringRef group, unsigned rank, unsigned nranks,
                        llvm::ArrayRef<TensorView> inputs, llvm::ArrayRef<TensorView> outputs,
                        llvm::StringRef what, Device &device) override;
  void abort() override;
  void reset() override;

private:
  struct Group {
    unsigned nranks = 0;
    uint64_t sequence = 0;
    unsigned arrived = 0, finished = 0;
    std::vector<std::vector<TensorView>> inputs, outputs;
    std::vector<std::string> callers;
  };
  llvm::Error waitFor(std::unique_lock<std::mutex> &lock, Group &g, uint64_t seq,
                      const std::function<bool()> &done, llvm::StringRef group, unsigned rank,
                      llvm::StringRef phase);

  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, Group> groups_;
  bool aborted_ = false;
  CrossWorkerReducer *across_ = nullptr;
  std::set<std::string, std::less<>> acrossGroups_;
};

} // namespace graphc
