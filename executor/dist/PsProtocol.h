//===- PsProtocol.h - The parameter-server protocol's messages ---*- C++ -*-===//
//
// The exchange that passes/PsPart.h plans: P ps tasks each hold a shard of
// the variables (master values and optimizer slots) and apply their
// updates; W workers send them gradients and take the variables back. The
// messages are point-to-point (MessageChannel.h); each one is a PsHeader
// followed by f32 values, the shard's variables in route order (PsLayout.h).
// Requests go from workers to tasks on one tag, replies back on another, so
// that a task's receive of any request never takes a reply.
//
//  Worker (PsClient.h), after each step: one request per task, carrying the
//  step, the learning rate, the version of the task's variables it last
//  read, and its sums for the task's variables (its graph outputs: sums
//  over its own towers, weighted by the global batch); then it waits for
//  every task's reply (the variables and their version) and writes them into
//  its executor's replicas, so its next step reads them.
//
//  Task (PsServer.h), one loop over requests from any worker:
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
//   - AWAY: the worker will be silent for a while that is no stall (the
//     chief's evaluation, or a synchronous worker waiting for it): until its
//     next gradients or its end, the task does not count its silence;
//   - DONE: the worker has finished. The chief's DONE asks for the final
//     state, answered once every worker is done; meanwhile the task sends the
//     chief a note after each update, so that the chief waits with a deadline
//     while the others still train. The loop ends when every worker is done.
//
// Deadlines (--collective-timeout): a worker waits that long for its replies;
// a task fails when a worker that has not finished (and is not away) sends
// nothing for that long, naming it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/MessageChannel.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace graphc {

enum class PsKind : uint32_t {
  Grads = 1, ///< worker → task: the sums of a step
  Save,      ///< the chief → task: send your state
  Done,      ///< worker → task: finished
  DoneFinal, ///< the chief → task: finished; send the final state when all are
  Vars,      ///< task → worker: the variables
  State,     ///< task → the chief: variables and slots (and statistics when final)
  Note,      ///< task → the chief waiting for the final state: an update was applied
  Away,      ///< worker → task: silent until its next gradients or end (an evaluation)
};

struct PsHeader {
  uint32_t kind = 0, worker = 0;
  int64_t step = 0;
  double lr = 0;
  uint64_t version = 0;   ///< request: the version read; reply: the version sent
  uint64_t staleness = 0; ///< Vars: this update's; final State: the largest
  uint64_t updates = 0;   ///< final State: updates applied
  double meanStaleness = 0;
};

constexpr int kPsRequestTag = 7101, kPsReplyTag = 7102;

/// "gradients", "a state request", ... (for errors).
const char *psKindName(uint32_t kind);

/// A message buffer: the header, then `values` floats.
std::vector<char> psMessage(int64_t values);
PsHeader psHeaderOf(const std::vector<char> &m);
void setPsHeader(std::vector<char> &m, const PsHeader &h);
float *psValuesOf(std::vector<char> &m);
const float *psValuesOf(const std::vector<char> &m);

/// One MPI message carries at most 2 GiB.
llvm::Error checkPsMessageSize(size_t bytes, unsigned task);

/// "ps task 1 (rank 3)".
std::string psTaskName(const MessageChannel &channel, unsigned task);

} // namespace graphc
