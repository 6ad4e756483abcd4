//===- Inspect.h - `graphc inspect` of a placed module ------------*- C++ -*-===//
//
// A placed module's report: the cost model's per-device table (nodes, FLOPs,
// parameter bytes where the parameter mode put them, bytes in and out per
// step, predicted times) with each device's peak activation bytes taken from
// the executor's memory plan for the very order the executor will issue.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace graphc {

llvm::Error printPlacedReport(const Module &placed, llvm::raw_ostream &os, bool json);

/// For a module placed on a cluster (`graphc place`, `graphrun train --gpus`
/// or `--cluster`): an error when a device's variables and peak activations
/// exceed its memory, with the figures. Success for anything else.
llvm::Error checkPlanFitsCluster(const Module &compiled);

} // namespace graphc
