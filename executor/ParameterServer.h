//===- ParameterServer.h - Workers and parameter-server tasks ----*- C++ -*-===//
//
// Runs the exchange that passes/PsPart.h plans: P ps tasks each hold a shard
// of the variables (master values and optimizer slots) and apply their
// updates; W workers send them gradients and take the variables back. The
// messages are point-to-point (Workers::exchange and receiveAny); each one is
// a PsHeader followed by f32 values, the shard's variables in route order.
//
//  Worker (PsClient), after each step: one request per task, carrying the
//  step, the learning rate, the version of the task's variables it last
//  read, and its sums for the task's variables (its graph outputs: sums
//  over its own towers, weighted by the global batch); then it waits for
//  every task's reply (the variables and their version) and writes them into
//  its executor's replicas, so its next step reads them.
//
//  Task (PsServer), one loop over requests from any worker:
//   - synchronous: one request per worker for the step; their sums added in
//     rank order (the global batch's mean gradient), the update applied once
//     by the task's part of the plan (the plan's own update nodes, so the
//     rule and numerics of one process), and every worker answered;
//   - asynchronous (--ps-async): each request applied as it comes, its sums
//     scaled by the global batch over the worker's samples (the mean over the
//     worker's own part), and only that worker answered.
//   A task's version counts the updates it applied; an update's staleness is
//   the version it is applied to minus the version its worker had read: how
//   many updates of other workers came in between (0 when synchronous). The
//   optimizer's step counter is the run's step when synchronous and the
//   task's version when asynchronous.
//   - SAVE (the chief's checkpoint): the task's variables and slots;
//   - DONE: the worker has finished. The chief's DONE asks for the final
//     state, answered once every worker is done; meanwhile the task sends the
//     chief a note after each update, so that the chief waits with a deadline
//     while the others still train. The loop ends when every worker is done.
//
// Deadlines (--collective-timeout): a worker waits that long for its replies;
// a task fails when a worker that has not finished sends nothing for that
// long, naming it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "executor/Workers.h"
#include "ir/Archive.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace graphc {

/// One variable a ps task holds (routed by passes/PsPart.h).
struct PsVariable {
  std::string name;
  unsigned task = 0;
  TensorType type;
  /// A worker: the graph output that carries its sum.
  unsigned output = 0;
  /// A task: the Input that takes the sum.
  std::string input;
  /// The optimizer slots held with it (of its type).
  std::vector<std::string> slots;
};

/// Where each task's variables lie in its messages.
class PsLayout {
public:
  PsLayout(std::vector<PsVariable> vars, unsigned tasks);
  unsigned tasks() const { return (unsigned)byTask_.size(); }
  /// The variables of `task`, in route order.
  const std::vector<const PsVariable *> &of(unsigned task) const { return byTask_[task]; }
  /// Values of the task's variables (a request's sums, a reply's variables).
  int64_t values(unsigned task) const { return values_[task]; }
  /// Values of the task's variables and slots (its state).
  int64_t stateValues(unsigned task) const { return stateValues_[task]; }

private:
  std::vector<PsVariable> vars_;
  std::vector<std::vector<const PsVariable *>> byTask_;
  std::vector<int64_t> values_, stateValues_;
};

/// Updates applied by a task, and their staleness.
struct PsTaskStats {
  uint64_t updates = 0, maxStaleness = 0;
  double meanStaleness = 0;
};

/// A worker's side.
class PsClient {
public:
  PsClient(Workers &workers, PsLayout layout);

  /// After step `step` (the executor's outputs): sends the sums, waits for
  /// the variables, writes them into `ex`. Returns the largest staleness of
  /// this worker's updates across the tasks.
  llvm::Expected<uint64_t> exchange(int64_t step, double lr, llvm::ArrayRef<Tensor> outputs,
                                    Executor &ex);
  /// The chief, for a checkpoint: every task's variables and slots.
  llvm::Expected<std::vector<NamedTensor>> state();
  /// This worker has finished. With `final` (the chief), waits until every
  /// worker has and returns the final state, with each task's statistics.
  llvm::Error finish(bool final, std::vector<NamedTensor> *state = nullptr,
                     std::vector<PsTaskStats> *stats = nullptr);

private:
  Workers &workers_;
  PsLayout layout_;
  std::vector<uint64_t> read_; ///< the version of each task last read
  std::vector<std::vector<char>> requests_, replies_;
};

/// A task's side: its part of the plan, run by an executor of its own.
class PsServer {
public:
  struct Options {
    bool async = false;
    /// Asynchronous: each worker's sums are multiplied by its scale (the
    /// global batch over the worker's samples).
    std::vector<double> workerScale;
  };
  /// `part` (selectPsTaskPart's) must outlive the server.
  static llvm::Expected<std::unique_ptr<PsServer>> create(Workers &workers, const Module &part,
                                                          unsigned task, PsLayout layout,
                                                          const ExecutorOptions &exec,
                                                          Options options);
  ~PsServer();

  /// The task's variables and slots (restored from a checkpoint before
  /// serving).
  Executor &executor() { return *executor_; }

  /// Serves until every worker is done.
  llvm::Expected<PsTaskStats> serve();

  /// Applies one update: the sums of `parts` (added in order, each scaled),
  /// at optimizer step `step`. (serve() calls it; tests call it directly.)
  llvm::Error apply(llvm::ArrayRef<const float *> parts, double scale, int64_t step, double lr);
  /// The task's variables, or variables and slots, as packed in messages.
  llvm::Error packVariables(float *out) const;
  llvm::Error packState(float *out) const;

private:
  PsServer(Workers &workers, unsigned task, PsLayout layout, Options options)
      : workers_(workers), task_(task), layout_(std::move(layout)), options_(std::move(options)) {}

  Workers &workers_;
  unsigned task_;
  PsLayout layout_;
  Options options_;
  std::unique_ptr<Executor> executor_;
  llvm::StringMap<Tensor> feeds_;
};

} // namespace graphc
