#include "passes/strategy/ParameterServerStrategy.h"

#include "ir/Diagnostics.h"
#include "passes/strategy/DataParallelStrategy.h"

namespace graphc {

llvm::Error checkPsRequest(const PlacementRequest &place) {
  if (place.tasks && place.ps > 0)
    return makeError("--ps and " + place.tasksSource + " both give the ps tasks; use one");
  if (place.ps < 0)
    return makeError("--ps " + llvm::Twine(place.ps) + ": must be at least 0");
  if (place.psAsync && place.psTasks() == 0)
    return makeError("--ps-async applies to parameter-server tasks: give --ps P (or ps tasks in "
                     "the cluster)");
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Module>>
ParameterServerStrategy::compile(const Module &forward, const CompileRequest &req,
                                 const PlacementRequest &place) const {
  if (auto e = checkPsRequest(place))
    return e;
  CompileRequest sharded = req;
  sharded.options.psTasks = place.psTasks();
  sharded.options.psAsync = place.psAsync;
  return compileDataParallel(forward, std::move(sharded), place, {"shard-over-ps"});
}

} // namespace graphc
