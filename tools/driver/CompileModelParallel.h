//===- CompileModelParallel.h - --strategy model-parallel ---------*- C++ -*-===//
//
// One replica's training graph (no towers) spread over a cluster's devices by
// the m-ETF scheduler (placement/ModelParallel.h), then placed and given its
// transfers as any plan is. The scheduler's memory estimate is checked
// against the memory plan (placement/analysis/MemoryNeeds.h); a plan that does
// not fit is scheduled again with less of each device's memory allowed (85%,
// 70%, 55%, 40%) before the compile gives up with the last plan's figures.
// The plan records meta strategy = model-parallel and model_parallel (the
// schedule's predicted step, each device's nodes and estimated peak, the
// memory share used and the time the scheduling took).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/driver/Compile.h"

namespace graphc {

llvm::Expected<std::unique_ptr<Module>>
compileModelParallel(const Module &forward, CompileRequest req, const PlacementRequest &place);

/// "model-parallel (m-ETF) over 4 devices: ..." for a model-parallel plan;
/// "" otherwise.
std::string describeModelParallel(const Module &plan);

} // namespace graphc
