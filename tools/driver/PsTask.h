//===- PsTask.h - Parameter-server tasks of `graphrun train` -----*- C++ -*-===//
//
// A run with --ps P (passes/PsPart.h) under `mpirun -np W+P`: ranks 0 ..
// W-1 train (rank 0 the chief), ranks W .. W+P-1 are the ps tasks. The
// trainer checks the world size and the plan's hash on every rank, then:
//
//  - a ps task (runPsTask) cuts its part of the plan, restores its variables
//    and slots from the checkpoint when resuming, and serves the workers
//    (executor/dist/PsServer.h) until every one is done; it reads no data
//    and prints nothing;
//  - a worker (PsWorker) cuts its part (selectWorkerPart, then
//    selectPsWorkerPart), exchanges its sums for the variables after every
//    step, and the chief gathers the tasks' state for its checkpoints.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Checkpoint.h"
#include "executor/dist/PsClient.h"
#include "executor/dist/Workers.h"
#include "tools/driver/TrainOptions.h"

#include <memory>
#include <optional>

namespace graphc {

/// Serves the variables of ps task `rank - W` of `plan` (the whole plan,
/// already compared across the ranks; cut here).
llvm::Error runPsTask(const TrainOptions &opts, Module &plan,
                      const std::optional<LoadedCheckpoint> &ckpt, Workers &workers);

/// A worker's side of a run with ps tasks.
class PsWorker {
public:
  /// Cuts the worker's part out of `plan` (the whole plan, or the part
  /// selectWorkerPart already cut) and keeps the plan's variables for
  /// checkpoints.
  static llvm::Expected<std::unique_ptr<PsWorker>> create(Module &plan, Workers &workers);

  bool async() const { return async_; }
  /// Bytes of variables and slots each task holds.
  const std::vector<int64_t> &taskBytes() const { return taskBytes_; }
  /// After a step: the exchange with the tasks (PsClient::exchange).
  llvm::Expected<uint64_t> exchange(int64_t step, double lr, llvm::ArrayRef<Tensor> outputs,
                                    Executor &ex) {
    return client_.exchange(step, lr, outputs, ex);
  }
  /// Work of its own is coming (PsClient::away).
  llvm::Error away() { return client_.away(); }
  bool finished() const { return finished_; }
  /// The chief: every variable of the plan (the tasks' variables and slots,
  /// the rest from this worker's executor), for a checkpoint; after finish(),
  /// the final ones.
  llvm::Expected<std::vector<NamedTensor>> checkpointTensors(const Executor &ex);
  /// The module whose variables a checkpoint holds (the whole plan's).
  const Module &checkpointLayout() const { return *layout_; }
  /// The end of the worker's run. The chief waits until every worker is
  /// done, then holds the final state (written into `ex`, for evaluation and
  /// the last checkpoint) and the tasks' statistics.
  llvm::Error finish(Executor &ex);
  const std::vector<PsTaskStats> &taskStats() const { return stats_; }

private:
  PsWorker(Workers &workers, PsLayout layout)
      : workers_(workers), client_(workers.messages(), std::move(layout)) {}

  Workers &workers_;
  PsClient client_;
  std::unique_ptr<Module> layout_;
  bool async_ = false, finished_ = false;
  std::vector<int64_t> taskBytes_;
  std::vector<NamedTensor> final_;
  std::vector<PsTaskStats> stats_;
};

} // namespace graphc
