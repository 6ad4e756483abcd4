//===- CompilePlan.cpp ----------------------------------------------------===//

#include "passes/strategy/CompilePlan.h"

#include "ir/Diagnostics.h"
#include "passes/AggregateGradients.h"

#include "passes/strategy/DataParallelStrategy.h"
#include "passes/strategy/ModelParallelStrategy.h"
#include "passes/strategy/ParameterServerStrategy.h"
#include "passes/strategy/ParamsAutoStrategy.h"
#include "passes/strategy/PipelineStrategy.h"

namespace graphc {

llvm::Error checkShardRequest(const CompileRequest &req, const PlacementRequest &place) {
  const CompileOptions &o = req.options;
  if (!o.shardOptimizer)
    return llvm::Error::success();
  if (o.params.kind != ParamPlacement::Mirrored)
    return makeError(std::string(kShardNeedsMirrored) + " (got --params " + modeName(o.params) +
                     ")");
  if (place.strategy != Strategy::DataParallel)
    return makeError("--shard-optimizer shards the optimizer state over data-parallel towers; "
                     "--strategy " +
                     modeName(place.strategy) + " has none");
  if (place.workers > 1 || place.tasks || place.psTasks() > 0)
    return makeError("--shard-optimizer runs in one process: its reduce-scatter and all-gather "
                     "do not cross workers yet (drop --workers, --tasks and --ps, or drop "
                     "--shard-optimizer)");
  if (o.lossScale != 0)
    return makeError("--shard-optimizer does not combine with dynamic loss scaling (--precision "
                     "fp16 or --loss-scale): each replica would check only its piece of the "
                     "gradients for overflow (give --loss-scale off, or drop --shard-optimizer)");
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<CompileStrategy>> strategyFor(const CompileRequest &req,
                                                             const PlacementRequest &place) {
  if (auto e = checkPsRequest(place))
    return e;
  if (auto e = checkShardRequest(req, place))
    return e;
  if (!place.onHost() && place.strategy == Strategy::ModelParallel)
    return std::make_unique<ModelParallelStrategy>();
  if (!place.onHost() && place.strategy == Strategy::Pipeline)
    return std::make_unique<PipelineStrategy>();
  if (place.strategy == Strategy::Pipeline)
    return makeError("--strategy pipeline puts its stages on GPUs: give --gpus N or --cluster "
                     "FILE (with --emulate to run them on CPU devices)");
  if (!place.onHost() && req.options.params.kind == ParamPlacement::Auto)
    return std::make_unique<ParamsAutoStrategy>();
  if (place.psTasks() > 0)
    return std::make_unique<ParameterServerStrategy>();
  return std::make_unique<DataParallelStrategy>();
}

llvm::Expected<std::unique_ptr<Module>>
compilePlan(const Module &forward, const CompileRequest &req, const PlacementRequest &place) {
  auto strategy = strategyFor(req, place);
  if (!strategy)
    return strategy.takeError();
  return (*strategy)->compile(forward, req, place);
}

} // namespace graphc
