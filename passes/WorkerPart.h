//===- WorkerPart.h - One worker's part of a multi-worker plan ---*- C++ -*-===//
//
// A multi-worker plan (meta `workers` = W > 1) is one module for the whole
// run: its training graph has T towers, worker w owning D_w consecutive ones
// (meta `worker_towers` = D_0, D_1, ...; W equal shares when absent), on the
// GPUs of the same numbers in a placed plan, and the global batch B is split
// among the T towers exactly as one process with T devices splits it. So
// worker w's samples are one contiguous part of every global batch, about
// proportional to its towers, and the workers compute the update of one
// process with T devices, whether or not their device counts differ.
//
// Every MPI rank runs its own part of that plan (between-graph replication).
// selectWorkerPart cuts worker w's part out of the plan and guarantees:
//
//  1. Towers. Nodes of the other workers' towers are gone, with everything
//     only they feed (their transfers to the host). The kept nodes keep their
//     names and tower numbers: random streams follow (seed, tower), so the
//     dropout draws are the one-process run's.
//  2. Devices. The worker's GPUs (those of its towers) become gpu:0 ..
//     gpu:D_w-1 (nodes, transfers, variables' device lists); the host cpu:0
//     is the worker's own host.
//  3. Data. Every data Input takes the worker's part of the global batch and
//     its SplitBatch gives the other workers' towers nothing (size 0), so the
//     worker's towers receive exactly their samples.
//  4. Sums across workers. Every sum over towers (an untowered AddN of tower
//     values: parameter-server gradient sums, moving averages, the loss) keeps
//     the worker's operands and is followed by an AllReduce {workers = W,
//     rank 0 of 1} `<sum>/across_workers` that adds the workers' sums; every
//     AllReduce group (mirrored gradient buckets, BatchNorm `sync` statistics)
//     keeps the worker's members, ranked 0.. in their old order, and gets
//     `workers = W`: the executor reduces inside the worker, then across the
//     workers (executor/dist/). Concatenations over towers keep the
//     worker's rows. So the loss output is the global batch's loss on every
//     rank, and every rank applies the same update to its replicas.
//  5. Gradient accumulation (AccumulateGradients.h): the micro-step graph is
//     cut the same way (it holds no sums over towers, so nothing crosses the
//     workers in a micro-step); the other workers' accumulators leave the
//     module.
//  6. Meta. `worker` = w, `worker_offset` (the first sample of the part in
//     the global batch), `batch` = the part, `global_batch` = B, `towers` =
//     D_w and `tower_batches` the worker's; `workers` stays.
//
// Errors: a plan whose towers do not add up to its workers'; a worker that
// gets no sample (a global batch smaller than the workers); variables that
// live on one GPU (--params gpu:K or spread), which are not planned across
// workers yet. A plan with one worker is returned unchanged.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace graphc {

/// The workers a plan was made for (meta `workers`; 1 when absent).
unsigned planWorkers(const Module &m);

/// Where worker w's samples lie in the global batch.
struct WorkerSlice {
  int64_t offset = 0, count = 0;
};
/// From a plan's meta (before or after selectWorkerPart).
llvm::Expected<WorkerSlice> workerSlice(const Module &m, unsigned worker);

llvm::Error selectWorkerPart(Module &m, unsigned worker);

} // namespace graphc
