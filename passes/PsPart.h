//===- PsPart.h - Parameter-server tasks of a multi-worker plan --*- C++ -*-===//
//
// A plan may name P parameter-server tasks besides its W workers (meta `ps` =
// P: `graphc place --ps P`, `graphrun train --ps P`); under mpirun, ranks
// 0 .. W-1 are the workers (rank 0 the chief) and ranks W .. W+P-1 the ps
// tasks. A ps task holds the master values of a shard of the variables and
// their optimizer slots, and applies their updates; a worker computes its
// gradients, sends them to the tasks that own them and takes the updated
// variables back (executor/dist/PsServer.h and PsClient.h run the exchange).
//
//  1. Shards (shardOverPs). Every variable the step updates (an Apply* or
//     Assign node), with the optimizer slots its update names, goes to one
//     task: largest first onto the task with the fewest bytes so far
//     (balanceByBytes). Recorded in the plan's meta: `ps` = P,
//     `ps_variables` (the updated variables, in module order) and
//     `ps_owners` (each one's task); `ps_async` = 1 with --ps-async.
//     Variables never updated (frozen statistics) stay with the workers,
//     which all hold the same values, as do gradient accumulators (each
//     tower's own; a worker sends its sums once per update, after its last
//     micro-step: AccumulateGradients.h). --ps-async with --accumulate K > 1
//     is refused: asynchronous updates have no update to accumulate for. The plan keeps its
//     variables on the host (--params cpu): each update reads one sum over the towers.
//  2. A worker's part (selectPsWorkerPart, after selectWorkerPart): the
//     updates are gone, and with them the sums across workers that fed them;
//     each update's operand, the worker's sum over its own towers (already
//     weighted by the global batch), becomes a graph output, and the routes
//     say which output goes to which task for which variable. Variables no
//     node reads any more (the slots) leave the module. With `ps_async` the
//     workers share no step: the loss is no longer summed across workers
//     (each worker's output is its own part's share of the global batch's
//     loss), and collectives across workers that remain (BatchNorm `sync`)
//     are refused.
//  3. A task's part (selectPsTaskPart, on the whole plan): for each of its
//     variables, an Input `ps/<var>` of the sum's type feeding the
//     variable's update (the same node, so the same kernel and attributes),
//     the Input `lr`, nothing else; every node on the task's host cpu:0, and
//     only the task's variables and slots in the module.
//
// Both parts list their routes in `ps_variables` order, so a worker and a
// task pack a message's tensors alike. Errors: P = 0; no updated variable; a
// variable with two updates or one updated per tower (--params mirrored), a
// non-f32 variable, an update off the host; a part of a plan without ps
// tasks; async BatchNorm `sync` across workers; dynamic loss scaling (each
// task would decide on its own shard whether to skip a step).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "ir/PsRoute.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace graphc {

/// Records the shards of P ps tasks in the plan (stage 1).
llvm::Error shardOverPs(Module &plan, unsigned ps, bool async);

/// Refuses --ps-async with gradient accumulation (K > 1).
llvm::Error checkPsAccumulation(unsigned accumulate, bool async);

/// The plan's ps tasks (meta `ps`; 0 when absent).
unsigned planPsTasks(const Module &m);
/// Whether the plan's ps tasks apply each worker's update as it arrives.
bool planPsAsync(const Module &m);

/// The shards recorded in a plan: each updated variable with its task, type
/// and slots (output and input unset), in `ps_variables` order.
struct PsShards {
  unsigned tasks = 0;
  std::vector<PsRoute> variables;
  /// Bytes each task holds (variables and slots).
  std::vector<int64_t> taskBytes;
};
llvm::Expected<PsShards> psShards(const Module &plan);

/// A worker's part (stage 2); `m` is already selectWorkerPart's part (or a
/// plan of one worker).
llvm::Expected<std::vector<PsRoute>> selectPsWorkerPart(Module &m);

/// Task `task`'s part of the whole plan (stage 3): its routes.
llvm::Expected<std::vector<PsRoute>> selectPsTaskPart(Module &m, unsigned task);

} // namespace graphc
