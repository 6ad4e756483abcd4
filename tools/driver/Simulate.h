//===- Simulate.h - What `graphc simulate` prints of a step ------*- C++ -*-===//
//
// The simulation itself is placement/analysis/StepSimulator.h; this is its
// report: a table per device, the predicted step and the critical path, or
// the same figures as JSON; a pipeline plan's bubble beside the theory's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "placement/analysis/StepSimulator.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace graphc {

/// The per-device table (compute, communication, idle, busy %), the
/// predicted step, and the critical path: its time per device and kind, and
/// its longest nodes.
void printSimulation(const SimResult &r, llvm::raw_ostream &os);
llvm::json::Value simulationJson(const SimResult &r);
/// A pipeline plan's bubble (placement/analysis/PipelineBubble.h) beside
/// the theory's, one line; nothing for other plans.
void printPipelineBubble(const Module &plan, const SimResult &r, llvm::raw_ostream &os);
/// The same as JSON; none for other plans.
std::optional<llvm::json::Value> pipelineBubbleJson(const Module &plan, const SimResult &r);

} // namespace graphc
