//===- ModelParallelStrategy.h - --strategy model-parallel -------*- C++ -*-===//
//
// One replica's training graph (no towers) spread over a cluster's devices by
// the m-ETF scheduler (placement/ModelParallel.h), run as place-devices'
// placer, then given its transfers as any plan is: the training and
// placement pipelines in one pass manager. The scheduler's memory estimate
// is checked against the executor's memory plan (placement/analysis/MemoryNeeds.h); a plan that
// does not fit is scheduled again with less of each overflowing device's
// memory allowed before the compile gives up with the last plan's figures.
// The plan records strategy = model-parallel and model_parallel (the
// schedule's predicted step, each device's nodes and estimated peak, the
// memory share used and the time the scheduling took).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/CompileStrategy.h"

namespace graphc {

class ModelParallelStrategy : public CompileStrategy {
public:
  llvm::StringRef name() const override { return "model-parallel"; }
  llvm::Expected<std::unique_ptr<Module>> compile(const Module &forward, const CompileRequest &req,
                                                  const PlacementRequest &place) const override;
};

/// "model-parallel (m-ETF): predicted step ..., scheduled in ...; <each
/// device>" for a model-parallel plan; "" otherwise.
std::string describeModelParallel(const Module &plan);

} // namespace graphc
