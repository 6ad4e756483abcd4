//===- AggregateGradients.h - Where variables live, how towers meet -*- C++ -*-===//
//
// The `aggregate-gradients` pass. It runs after replicate-towers, whose
// updates (Apply*, Assign) each read a tower sum: an untowered AddN with one
// operand per tower (a gradient, or a weighted moving-average value). By
// --params it decides where every variable lives and how the towers' parts
// meet, and guarantees:
//
//  1. `cpu` (parameter server on the host), `gpu:K` (all on GPU K) and
//     `spread` (each variable on one GPU, balanced by bytes: largest first
//     onto the least-loaded GPU, ties to the lower GPU): the variable, its
//     optimizer slots, every Variable node that reads it, its tower sum and
//     its update request the variable's device, and Variable::devices lists
//     exactly that device. Towers send their parts there.
//  2. `mirrored`: Variable::devices lists every tower's GPU; tower t reads its
//     replica on gpu:t; the tower sums are replaced by AllReduce nodes
//     {group, rank = t, nranks = N, reduction = sum} on every tower, one per
//     bucket, and every update by one copy per tower `tower_<t>/<update>` on
//     gpu:t writing that tower's replica with the all-reduced value, so the
//     replicas stay equal. Buckets hold gradients in the order they become
//     ready in the backward pass (the producer's position in the graph: the
//     last layers first) and close before they would pass --bucket-bytes (a
//     larger gradient gets a bucket of its own); each bucket's AllReduce is
//     moved right after the last gradient it holds (Graph::moveAfter), so
//     the executor issues it while the backward pass goes on. Moving-average
//     values are bucketed the same way but reduced after the last gradient
//     bucket: they are not needed before the updates, and a collective in the
//     forward pass would make every tower wait for the slowest. Each tower
//     issues its buckets in the same order; an empty tower all-reduces zeros.
//  2b. `mirrored` with --shard-optimizer (docs/placement.md): the same
//     buckets, but a gradient bucket is a ReduceScatter per tower (result i:
//     piece t of gradient i's sum, ir/Shards.h: uneven pieces, no padding);
//     tower t's update of each variable carries {rank = t, nranks = N},
//     reads that piece and updates that piece of its replica; the variable's
//     optimizer slots are `sharded` (gpu:t holds piece t only, 1/N of their
//     bytes); after tower t's updates, one AllGather {group gather_<i>, rank,
//     nranks, var} per variable brings every tower's updated piece into
//     every replica. The collectives per tower come in one order, so no rank
//     waits on a call another rank makes later. Sums are grouped as the
//     all-reduce's (each element in rank order), so parameters equal the
//     unsharded run's bit for bit. Moving averages stay all-reduced. Other
//     modes refuse the flag (kShardNeedsMirrored).
//  3. Variables that are read but never updated (frozen statistics) follow
//     the same placement. No variable, slot or update lands on a device the
//     mode did not ask for.
//  4. Gradient accumulation (AccumulateGradients.h): the Variable reads of the
//     micro-step graph request the same storage as main's; accumulators and
//     the nodes that read or reset them stay on their towers' devices.
//
// Without towers and with --towers 0 the pass changes nothing.
//
// Errors: an unknown mode; `gpu:K` with K outside the towers' GPUs (the
// message lists the devices); a module without towers; an update that does
// not read a tower sum. Placement (assigned devices) and Transfer nodes are
// left to place-devices and insert-transfers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> aggregateGradients(Module &m, const AggregateOptions &opts);

/// The one refusal of --shard-optimizer with another --params (the tools
/// check it first, with the same words).
inline constexpr const char *kShardNeedsMirrored =
    "--shard-optimizer shards the optimizer state of mirrored variables: it needs --params "
    "mirrored";

/// Greedy balancing: items sorted by bytes, largest first (ties: lower
/// index), each onto the device with the fewest bytes so far (ties: lower
/// device). Returns the device index of every item.
std::vector<unsigned> balanceByBytes(llvm::ArrayRef<int64_t> bytes, unsigned devices);

/// Consecutive groups of items (in the given order) whose bytes stay within
/// `cap`; an item larger than the cap is a group of its own. Returns each
/// group's first index, plus the end.
std::vector<size_t> bucketBoundaries(llvm::ArrayRef<int64_t> bytes, int64_t cap);

} // namespace graphc
