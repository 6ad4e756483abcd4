//===- CompilePlan.cpp ----------------------------------------------------===//

#include "passes/strategy/CompilePlan.h"

#include "passes/strategy/DataParallelStrategy.h"
#include "passes/strategy/ModelParallelStrategy.h"
#include "passes/strategy/ParameterServerStrategy.h"
#include "passes/strategy/ParamsAutoStrategy.h"

namespace graphc {

llvm::Expected<std::unique_ptr<CompileStrategy>> strategyFor(const CompileRequest &req,
                                                             const PlacementRequest &place) {
  if (auto e = checkPsRequest(place))
    return e;
  if (!place.onHost() && place.strategy == Strategy::ModelParallel)
    return std::make_unique<ModelParallelStrategy>();
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
