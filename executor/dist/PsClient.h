//===- PsClient.h - A worker's side of the parameter servers -----*- C++ -*-===//
//
// After each step a worker sends every ps task its sums and takes the
// task's variables back into its executor; the chief also gathers the
// tasks' state for checkpoints and, at the end, the final state. The
// protocol is PsProtocol.h's; the messages go through the channel the
// caller passes (MPI's in a run, threads' in tests).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "executor/dist/MessageChannel.h"
#include "executor/dist/PsLayout.h"
#include "executor/dist/PsProtocol.h"
#include "ir/Archive.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace graphc {

/// Updates applied by a task, and their staleness.
struct PsTaskStats {
  uint64_t updates = 0, maxStaleness = 0;
  double meanStaleness = 0;
};

class PsClient {
public:
  PsClient(MessageChannel &channel, PsLayout layout);

  /// After step `step` (the executor's outputs): sends the sums, waits for
  /// the variables, writes them into `ex`. Returns the largest staleness of
  /// this worker's updates across the tasks.
  llvm::Expected<uint64_t> exchange(int64_t step, double lr, llvm::ArrayRef<Tensor> outputs,
                                    Executor &ex);
  /// The chief, for a checkpoint: every task's variables and slots.
  llvm::Expected<std::vector<NamedTensor>> state();
  /// This worker will be silent for a while that is no stall (the chief's
  /// evaluation): the tasks do not count it until its next gradients.
  llvm::Error away();
  /// This worker has finished. With `final` (the chief), waits until every
  /// worker has and returns the final state, with each task's statistics.
  llvm::Error finish(bool final, std::vector<NamedTensor> *state = nullptr,
                     std::vector<PsTaskStats> *stats = nullptr);

private:
  /// A message of `kind` without values to every task.
  llvm::Error tell(PsKind kind, llvm::StringRef what);
  /// Packs the sums for every task into its request.
  llvm::Error packRequests(int64_t step, double lr, llvm::ArrayRef<Tensor> outputs);
  /// Task `task`'s reply to the gradients of `step` into `ex`; its staleness.
  llvm::Expected<uint64_t> readVariables(unsigned task, size_t received, int64_t step,
                                         Executor &ex);
  /// The rank of ps task `task`.
  unsigned taskRank(unsigned task) const { return channel_.numWorkers() + task; }

  MessageChannel &channel_;
  PsLayout layout_;
  std::vector<uint64_t> read_; ///< the version of each task last read
  std::vector<std::vector<char>> requests_, replies_;
};

} // namespace graphc
