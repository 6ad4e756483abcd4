//===- CompilePlan.h - The compiler as the tools call it ----------*- C++ -*-===//
//
// A single-device forward model and a typed request (CompileRequest.h) in, a
// plan out, by the strategy the request asks for (CompileStrategy.h). The one
// place that knows every strategy.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/CompileStrategy.h"

#include <memory>

namespace graphc {

/// The strategy a request asks for: for the host's plan (place.onHost())
/// data-parallel or, with ps tasks, parameter-server;
/// otherwise model-parallel or pipeline by --strategy (a pipeline without
/// devices is an error), params-auto by --params auto,
/// parameter-server with ps tasks, data-parallel. Errors: the ps tasks given
/// twice (--ps and a cluster of tasks) or negative, --ps-async without ps
/// tasks.
llvm::Expected<std::unique_ptr<CompileStrategy>> strategyFor(const CompileRequest &req,
                                                             const PlacementRequest &place);

/// Success unless --shard-optimizer is asked where it cannot shard: other
/// --params than mirrored, another strategy, several workers or ps tasks,
/// dynamic loss scaling; the error says which.
llvm::Error checkShardRequest(const CompileRequest &req, const PlacementRequest &place);

/// The plan of `forward` by the strategy the request asks for.
llvm::Expected<std::unique_ptr<Module>>
compilePlan(const Module &forward, const CompileRequest &req, const PlacementRequest &place);

} // namespace graphc
