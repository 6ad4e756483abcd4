//===- Inspect.h - `graphc inspect` of a placed module ------------*- C++ -*-===//
//
// A placed module's report: the cost model's per-device table (nodes, FLOPs,
// parameter bytes where the parameter mode put them, bytes in and out per
// step, predicted times) with each device's peak activation bytes taken from
// the executor's memory plan for the very order the executor will issue.
//
// A plan for several workers is reported per worker, each as its rank runs
// it (passes/WorkerPart.h: its towers on its own host and GPUs, numbered from
// gpu:0): a table of the workers (task, towers, samples of every batch,
// FLOPs, variable and peak activation bytes, traffic inside the worker and
// between workers), then each worker's per-device table and traffic. Between
// workers is the ring all-reduce of every sum marked `workers` (2(W-1)/W of
// its bytes, sent and as much received, once per worker); the network's
// time is not modelled.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace graphc {

llvm::Error printPlacedReport(const Module &placed, llvm::raw_ostream &os, bool json);

} // namespace graphc
