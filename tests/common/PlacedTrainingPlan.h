//===- PlacedTrainingPlan.h - A built-in model compiled and placed for GPUs -*- C++ -*-===//
//
// A training plan as graphrun and gpu_train_bench make it: a built-in model,
// the default training pipeline, then placement (the placer over the host and
// `towers` GPUs, the kernel registry deciding what runs where) and the
// transfers. Header-only, so that only the suites that use it link the
// compiler's libraries (graphc_models, graphc_passes, graphc_placement).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/models/Models.h"
#include "kernels/Kernel.h"
#include "passes/Pass.h"
#include "placement/Placer.h"

namespace graphc {

/// `o` gives the batch, towers, params, precision and optimizer; the placer
/// is set here, and fuse-bn-relu's gradient half turned on (a GPU plan, as
/// the strategies make it).
inline llvm::Expected<std::unique_ptr<Module>>
placedTrainingPlan(llvm::StringRef model, const models::ModelOptions &mo, CompileOptions o) {
  auto m = models::buildModel(model, mo);
  if (!m)
    return m.takeError();
  o.fuseBatchNormReluGradients = true;
  o.placer = makePlacerFunction(Cluster::defaultCluster(o.towers), [](const Node &n, DeviceKind k) {
    return KernelRegistry::global().supports(n, k);
  });
  PassManager pm(o);
  for (const char *pipeline : {kDefaultTrainingPipeline, kPlacementPipeline})
    if (auto e = pm.addPipeline(pipeline))
      return e;
  if (auto e = pm.run(**m))
    return e;
  return std::move(*m);
}

} // namespace graphc
