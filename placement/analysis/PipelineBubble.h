//===- PipelineBubble.h - The idle share of a pipeline's stages ---*- C++ -*-===//
//
// A pipeline plan (--strategy pipeline, passes/PipelineStages.h) keeps each
// stage's GPU idle while the first micro-batches fill the stages and the
// last drain them: with S balanced stages and M micro-batches, each stage
// works M of the M+S-1 block times, so the theory's bubble is
// (S-1)/(M+S-1) of the time. pipelineBubble() measures it on a simulated
// step (StepSimulator.h): over the span from the first tower kernel's start
// to the last one's end, the share the stages' GPUs (those that run tower
// kernels) run no kernel, their mean. Unbalanced stages, copies between them
// and a backward block that is not twice a forward one all show in it, and
// so do emulated GPUs that wait for the host's cores (docs/placement.md);
// the updates and all-reduces after the span do not.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "placement/analysis/StepSimulator.h"

#include <optional>

namespace graphc {

/// (S-1)/(M+S-1): the share of a stage's time idle in theory.
inline double theoreticalBubble(unsigned stages, unsigned microBatches) {
  return stages + microBatches > 1
             ? (double)(stages - 1) / (double)(microBatches + stages - 1)
             : 0.0;
}

struct PipelineBubble {
  unsigned stages = 0, microBatches = 0, pipelines = 1;
  double spanSeconds = 0; ///< the first tower kernel's start to the last one's end
  double bubble = 0;      ///< 1 - the stages' mean busy time / span
  double theory = 0;      ///< theoreticalBubble(stages, microBatches)
};

/// The bubble of `plan`'s simulated step `r`; none for a plan that is not a
/// pipeline (PlanInfo's pipelineStages) or whose step runs no tower kernel.
std::optional<PipelineBubble> pipelineBubble(const Module &plan, const SimResult &r);

} // namespace graphc
