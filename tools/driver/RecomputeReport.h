//===- RecomputeReport.h - What --recompute costs, for inspect and simulate -*- C++ -*-===//
//
// A plan the recompute pass rewrote (passes/Recompute.h) runs copies of some
// forward nodes in its backward pass. `graphc inspect` and `graphc simulate`
// report them: per device, the copies, their FLOPs against the device's, and
// their kernel time (the step-time model's, as the simulator times every
// node) against the device's kernels and, in the simulation, the predicted
// step; then which nodes are recomputed. Nothing for a plan without copies.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace graphc {

/// One line for `graphc place` and graphrun's run plan: "--recompute auto:
/// 212 copies in the backward pass, +18.3% FLOPs and +12.1% kernel time on
/// gpu:0" (the device with the largest share); "" without copies.
std::string describeRecompute(const Module &placed);
/// The report; `stepSeconds`: the simulator's predicted step, when known.
void printRecomputeReport(const Module &placed, llvm::raw_ostream &os,
                          std::optional<double> stepSeconds = std::nullopt);
/// The same figures; none for a plan without copies.
std::optional<llvm::json::Value>
recomputeReportJson(const Module &placed, std::optional<double> stepSeconds = std::nullopt);

} // namespace graphc
