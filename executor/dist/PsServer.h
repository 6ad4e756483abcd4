//===- PsServer.h - A parameter-server task ----------------------*- C++ -*-===//
//
// A ps task holds its shard of the variables and their optimizer slots in
// an executor of its own, running its part of the plan (selectPsTaskPart:
// the plan's update nodes fed by the workers' sums), and serves the workers
// until every one is done: synchronous rounds or asynchronous updates, the
// chief's state requests and the final state (PsProtocol.h). The messages
// go through the channel the caller passes (MPI's in a run, threads' in
// tests).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "executor/dist/MessageChannel.h"
#include "executor/dist/PsClient.h"
#include "executor/dist/PsLayout.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace graphc {

class PsServer {
public:
  struct Options {
    bool async = false;
    /// Asynchronous: each worker's sums are multiplied by its scale (the
    /// global batch over the worker's samples).
    std::vector<double> workerScale;
  };
  /// `part` (selectPsTaskPart's) must outlive the server.
  static llvm::Expected<std::unique_ptr<PsServer>>
  create(MessageChannel &channel, const Module &part, unsigned task, PsLayout layout,
         const ExecutorOptions &exec, Options options);
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
  PsServer(MessageChannel &channel, unsigned task, PsLayout layout, Options options)
      : channel_(channel), task_(task), layout_(std::move(layout)), options_(std::move(options)) {}
  /// One serve(): its buffers and what it knows of each worker.
  class Serving;

  MessageChannel &channel_;
  unsigned task_;
  PsLayout layout_;
  Options options_;
  std::unique_ptr<Executor> executor_;
  llvm::StringMap<Tensor> feeds_;
};

} // namespace graphc
