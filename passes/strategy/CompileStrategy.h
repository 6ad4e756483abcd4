//===- CompileStrategy.h - How a plan shares out the work --------*- C++ -*-===//
//
// How the devices share the work is a strategy, each behind this interface
// (the tools call compilePlan, CompilePlan.h, which picks one):
//
//   data-parallel     a tower per GPU of every worker, the batch split among
//                     them, the gradients aggregated as --params says
//                     (DataParallelStrategy.h); without devices, one host
//                     tower per worker;
//   parameter-server  data-parallel, and the updated variables sharded over
//                     P ps tasks (ParameterServerStrategy.h);
//   model-parallel    one replica spread over the devices by m-ETF under
//                     their memory (ModelParallelStrategy.h);
//   pipeline          stages of one replica on the GPUs, micro-batches
//                     flowing through them, pipelines data parallel
//                     (PipelineStrategy.h);
//   params-auto       the data-parallel (or parameter-server) plan in every
//                     parameter mode, the one predicted fastest among those
//                     that fit (ParamsAutoStrategy.h).
//
// A plan whose cluster has GPUs also fuses each batch norm's ReluGrad into
// its gradient (fuse-bn-relu, passes/FuseBatchNormRelu.h); the host's plan
// does not.
//
// Each compile is a list of registered pipelines the pass manager runs
// (Compile.h: runPipelines), so every stage is verified, dumped and timed
// like any pass; what a strategy decides before its pipeline (the cluster,
// the workers, the batch shares) it records in the plan (ir/PlanInfo.h)
// first, so the dumps show it too.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/CompileRequest.h"

#include <memory>

namespace graphc {

class CompileStrategy {
public:
  virtual ~CompileStrategy() = default;
  /// "data-parallel", "parameter-server", "model-parallel", "pipeline" or
  /// "params-auto".
  virtual llvm::StringRef name() const = 0;
  /// The plan of `forward` (a single-device forward model, left as it is)
  /// under `req` and `place`; it keeps `forward` as graph "forward".
  virtual llvm::Expected<std::unique_ptr<Module>> compile(const Module &forward,
                                                          const CompileRequest &req,
                                                          const PlacementRequest &place) const = 0;
};

} // namespace graphc
