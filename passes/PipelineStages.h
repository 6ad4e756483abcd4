//===- PipelineStages.h - Micro-batch towers as pipeline stages ---*- C++ -*-===//
//
// The `pipeline-stages` pass (--strategy pipeline). It runs where
// aggregate-gradients would, after replicate-towers made T = M·P towers of
// the one-replica step (M micro-batches for each of P pipelines; tower
// t = p·M + k is micro-batch k of pipeline p), split-batch and
// concat-outputs. All micro-batches run in ONE graph run, so the executor
// overlaps stage s of one micro-batch with stage s+1 of the one before. It
// guarantees, for S stages:
//
//  1. Stages. Tower 0's forward nodes (not the backward pass of
//     Recompute.h's backwardNodes, not sources) in graph order, which is
//     topological, are cut into S contiguous, non-empty runs that balance
//     each run's cost: its nodes' predicted seconds plus those of the
//     backward nodes named after them (`grad/<forward node>/...`), so the
//     slowest stage is as fast as a contiguous cut allows (balancedCuts).
//     A backward node not named after a forward node takes the latest stage
//     of its operands; a source (Variable, Constant) the stage of its
//     variable, or the earliest of its readers. Every tower's copy of a node
//     takes tower 0's stage: it requests stageDevice(p, s) = gpu:(p·S + s).
//     Edges go from a stage to itself or a later one in the forward pass,
//     back in the backward pass: the stages form a pipeline.
//  2. Variables. A variable lives with the stage of its first reader, with
//     its optimizer slots: on that stage's device of every pipeline.
//  3. Gradients. With one pipeline, each tower sum over the M micro-batches
//     (a chain of two-operand AddNs, so each micro-batch's gradient dies
//     once added; the same bits as one AddN) and its update run on the
//     variable's stage device: one update per step from the sum over the
//     whole batch. With P pipelines,
//     each pipeline sums its M micro-batches on its stage device
//     (`pipeline_<p>/<sum>`), one AllReduce per stage and pipeline (group
//     `stage_<s>/grads`, rank p of P; moving averages in `stage_<s>/state`)
//     adds the pipelines' sums, and each pipeline updates its replica
//     (`pipeline_<p>/<update>`), so the replicas stay equal.
//  4. Order. The executor issues each device's nodes in graph order among
//     ready ones (placement/analysis/Schedule.h), so the graph order is the
//     pipeline schedule: the host's feeding nodes first; then every tower
//     node by the start of its block (stage, forward or backward,
//     micro-batch) in the schedule played with a forward block taking one
//     unit and a backward block two (scheduleStarts); then the sums,
//     all-reduces, updates and the host's joins. GPipe runs the M forward
//     blocks of a stage, then its M backward blocks; 1F1B (the default)
//     runs S-s-1 forward blocks on stage s, then one forward and one
//     backward in turn, so a stage holds the activations of at most S-s
//     micro-batches, not M.
//  5. The plan records S, M, P and the schedule as typed fields of PlanInfo
//     (pipelineStages, microBatches, pipelines, pipelineSchedule) and, for
//     people, `pipeline` (JSON): per stage its device (of pipeline 0), its
//     first forward node, its forward nodes and its predicted seconds.
//
// Batch norm keeps per-micro-batch statistics (the towers' `local` mode):
// the step equals one device's with --accumulate M, or M data-parallel
// towers; models without batch norm (or --bn frozen) equal one device's step
// on the whole batch. Errors: no stages, a tower count other than M·P, fewer
// forward nodes than stages, an update that does not read a tower sum.
// Placement and transfers are left to place-devices and insert-transfers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> pipelineStages(Module &m, const PipelineOptions &opts);

/// gpu:(pipeline·stages + stage).
DeviceId stageDevice(unsigned pipeline, unsigned stage, unsigned stages);

/// The first index of each of `parts` contiguous non-empty runs of `costs`
/// whose largest sum (run j's weighted by weights[j], 1 without weights) is
/// the smallest possible, then costs.size() (parts <= costs.size()).
std::vector<size_t> balancedCuts(llvm::ArrayRef<double> costs, unsigned parts,
                                 llvm::ArrayRef<double> weights = {});

/// When each block of one pipeline starts under `schedule` with a forward
/// block taking one unit and a backward block two: [stage][k] for the
/// forward blocks (`forward`) and the backward blocks (`backward`).
struct BlockStarts {
  std::vector<std::vector<double>> forward, backward;
  double end = 0; ///< when the last block ends
};
BlockStarts scheduleStarts(PipelineSchedule schedule, unsigned stages, unsigned microBatches);

} // namespace graphc
