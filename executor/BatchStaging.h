//===- BatchStaging.h - The batch split on a GPU, not on the host -*- C++ -*-===//
//
// A placed plan takes the batch where the data arrives, on the host: the
// global Input and its SplitBatch are on cpu:0 (passes/SplitBatch.h), each
// tower's slice crosses to its device in a Transfer, and the towers' outputs
// come back there to be summed (AddN) or concatenated (ConcatBatch). When the
// towers run on GPUs of this process, that host work sits inside every step
// (the whole batch copied on the host to split it, one staged copy per
// tower) and keeps the step out of a CUDA graph. The executor runs that
// plumbing on a GPU instead, without changing the plan:
//
//  1. An Input on a host device that is no graph output, whose readers are
//     all Transfers to GPUs or SplitBatch nodes on that device whose slices
//     are read by Transfers to GPUs only, moves to a GPU with those
//     SplitBatch nodes: to the device of the first Transfer (in graph order)
//     that moves a non-empty slice, tower 0's unless it has no samples. The
//     batch is copied there once per step (or prefetched during the step
//     before: Executor::prefetch), split there by device copies, and each
//     slice reaches its tower by a device copy, a peer copy between GPUs.
//  2. A join of tower outputs (AddN, ConcatBatch) on a host device that is a
//     graph output read by nothing, each of whose operands is a Transfer on
//     that device from a GPU read by the join alone, moves with those
//     Transfers to the GPU its first operand comes from. So does a Transfer
//     from a GPU onto a host device whose result is a graph output read by
//     nothing (it becomes a copy on that GPU). Outputs are copied out after
//     the step, as before.
//
// Everything else stays where the plan put it: an input something on the
// host reads, a split with a host tower, GPUs emulated on CPU devices (their
// mapped devices are CPUs, so nothing matches). The copies and sums are the
// same, in the same order, so a step computes the same values.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

namespace graphc {

/// The nodes of `g` that run on a GPU instead of the host device `deviceOf`
/// gives them (the executor's mapped devices), with that GPU.
llvm::DenseMap<const Node *, DeviceId>
stageBatchOnDevices(const Graph &g, llvm::function_ref<DeviceId(const Node &)> deviceOf);

} // namespace graphc
