//===- ParameterServerStrategy.h - Variables on ps tasks ---------*- C++ -*-===//
//
// The data-parallel plan (DataParallelStrategy.h) whose updated variables
// and their optimizer slots are held by P parameter-server tasks besides the
// workers: the same pass manager runs shard-over-ps (passes/PsPart.h) after
// the placement pipeline, so the shards are verified, dumped and timed with
// the rest. P is the cluster of tasks' ps tasks, or --ps; --ps-async makes
// each worker's update apply as it arrives.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/CompileStrategy.h"

namespace graphc {

class ParameterServerStrategy : public CompileStrategy {
public:
  llvm::StringRef name() const override { return "parameter-server"; }
  llvm::Expected<std::unique_ptr<Module>> compile(const Module &forward, const CompileRequest &req,
                                                  const PlacementRequest &place) const override;
};

/// The request's ps tasks are consistent: given once (--ps or a cluster of
/// tasks), not negative, and --ps-async only with some.
llvm::Error checkPsRequest(const PlacementRequest &place);

} // namespace graphc
