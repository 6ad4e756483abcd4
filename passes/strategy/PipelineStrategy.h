//===- PipelineStrategy.h - --strategy pipeline -------------------*- C++ -*-===//
//
// Pipeline parallelism: the one-replica step cut into S stages on S GPUs,
// the batch split into M micro-batches that flow through them in one graph
// run (passes/PipelineStages.h), one update per step from the gradients of
// the whole batch. With N GPUs and --stages S, N/S pipelines run data
// parallel, each on micro-batches of its share of the batch, their
// per-stage sums all-reduced. The compile is the training pipeline with
// M·P towers and pipeline-stages in place of aggregate-gradients, then
// kPlacementPipeline; the plan records strategy = pipeline and the
// pipeline's shape (PlanInfo). The stages are cut by time; where the
// executor's memory plan overflows a stage's GPU, that stage's time weighs
// more in the cut and the step is cut again (up to four cuts), so that the
// cut moves work off it. When no cut fits, --recompute auto compiles the
// cuts again in the same order with activations recomputed
// (passes/Recompute.h; each stage's copies stay on its GPU and in its
// micro-batch's backward block) and keeps the first that fits. Whether
// the plan finally fits is checked by the tools as for every plan
// (FitAdvisor.h: compileThatFits).
//
// Refused, each with one line that says what to give instead: several
// workers, tasks or ps tasks; --towers, --split, --params, --accumulate,
// --shard-optimizer, --bn sync, dynamic loss scaling;
// more stages than GPUs or GPUs not a multiple of the stages; a batch that
// P pipelines of M micro-batches do not divide.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/CompileStrategy.h"

#include <optional>

namespace graphc {

class PipelineStrategy : public CompileStrategy {
public:
  llvm::StringRef name() const override { return "pipeline"; }
  llvm::Expected<std::unique_ptr<Module>> compile(const Module &forward, const CompileRequest &req,
                                                  const PlacementRequest &place) const override;
};

/// "pipeline: 4 stages x 8 micro-batches (1f1b), 1 pipeline; gpu:0 from
/// conv1 (12 nodes, 1.20 ms), ..." for a pipeline plan; "" otherwise.
std::string describePipeline(const Module &plan);

/// A pipeline plan's stages, micro-batches per pipeline and pipelines (its
/// towers are M x P) and its schedule, from its PlanInfo; nullopt for other
/// plans.
struct PipelineShape {
  unsigned stages = 1, microBatches = 1, pipelines = 1;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
};
std::optional<PipelineShape> pipelineShape(const Module &plan);

} // namespace graphc
