//===- PlanInfo.h - What a module says about the plan it is -----*- C++ -*-===//
//
// The plan's contract: every fact a module carries beside its graphs (the
// batch it was bound to, its towers, the workers and parameter-server tasks
// it was split for, the cluster it was placed on, its precision, a
// checkpoint's position, ...) as one typed struct, PlanInfo, which
// Module::plan() holds. Passes, placement, the executor and the tools read
// and write these fields; nothing names a key.
//
// The text form is the module header's `meta` line (printer and parser, and
// module files, checkpoints and ONNX exports through them). toAttrs() and
// fromAttrs() are the only code that turns fields into keys and back:
//
//   - each key's kind and range is one row of ir/OpAttrs.def (GRAPHC_META),
//     checked by fromAttrs() and, for modules built in memory, by the
//     verifier (checkPlanInfo);
//   - modes are enums (ir/Modes.h), the cluster and the task list parsed
//     structures (ir/Cluster.h, ir/Tasks.h), written back with the same
//     functions that wrote them, so a module prints byte for byte as before;
//   - the report fields (the `--params auto` comparison, the model-parallel
//     schedule summary, each pipeline stage's description) stay the JSON
//     text the tools wrote for people;
//   - keys graphc does not know pass through untouched (`other`).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Attribute.h"
#include "ir/Cluster.h"
#include "ir/Modes.h"
#include "ir/Tasks.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace graphc {

/// A checkpoint's position in a run (the header module of a checkpoint file;
/// executor/Checkpoint.h). All or nothing in a header graphc wrote.
struct CheckpointPosition {
  std::optional<int64_t> step, epoch, epochBatches, epochSamples, seed, batch;
  std::optional<std::string> data; ///< what the run trained on (its data set's description)
  bool operator==(const CheckpointPosition &) const = default;
};

struct PlanInfo {
  // Where the model came from and how it is bound.
  std::optional<std::string> source;    ///< "onnx", "models" (built in), or what a file says
  /// The default-domain opset of the ONNX model first imported (the exporter
  /// writes an op of a later opset, such as Gelu, only where it allows).
  std::optional<int64_t> onnxOpset;
  std::optional<int64_t> seed;          ///< initializers' seed (a uint64 seed's bits)
  std::optional<int64_t> batch;         ///< the bound batch: this worker's share in a part
  std::optional<bool> training;         ///< a training step (TrainingMode)
  std::optional<std::string> optimizer; ///< the update rule AddOptimizer added
  /// The loss add-loss computes (absent: cross-entropy); a checkpoint's
  /// forward graph keeps it, so evaluation scores what training minimised.
  std::optional<LossKind> loss;
  /// The weights of the layers into which the exporter's optimizer folded a
  /// BatchNorm, as its node metadata says (PyTorch's dynamo exporter
  /// records onnxscript's FuseBatchNormInto* rewrites; the weights keep the
  /// module's names, so nothing else shows the fold).
  std::optional<Strings> exporterFolded;

  // Towers and the batch split (TowerReplication, SplitBatch).
  std::optional<int64_t> towers;
  std::optional<Ints> towerBatches;
  std::optional<SplitSpec> split;
  std::optional<Floats> splitSpeeds; ///< --split auto: the towers' relative speeds
  std::optional<int64_t> accumulate; ///< micro-steps per step (AccumulateGradients)

  // Placement (passes/strategy/).
  std::optional<Cluster> cluster;
  std::optional<ParamPlacement> params;
  std::optional<std::string> paramsChosen; ///< --params auto: the mode it kept
  std::optional<std::string> paramsWhy;    ///< --params auto: one line of why
  std::optional<std::string> paramsAuto;   ///< --params auto: every mode's figures (JSON)
  std::optional<Strategy> strategy;
  std::optional<std::string> modelParallel; ///< the schedule's summary (JSON)
  /// A value sent to another device is freed once the copies have run
  /// (placement/analysis/Schedule.h, rule 5): the memory orders' plans.
  std::optional<bool> releaseSent;

  // A pipeline (PipelineStages): all four or none; towers = pipelines x micro-batches.
  std::optional<int64_t> pipelineStages; ///< S stages, a device each
  std::optional<int64_t> microBatches;   ///< M micro-batches per pipeline
  std::optional<int64_t> pipelines;      ///< P pipelines, data parallel
  std::optional<PipelineSchedule> pipelineSchedule;
  std::optional<std::string> pipeline; ///< each stage's device, first node, size, seconds (JSON)

  // Precision (MixedPrecision, LossScaling).
  std::optional<Precision> precision;
  std::optional<double> lossScale;
  std::optional<int64_t> lossScaleInterval;

  // Workers (WorkerPart): the whole plan, and one worker's part of it.
  std::optional<int64_t> workers;
  std::optional<Ints> workerTowers;
  std::optional<TaskCluster> tasks;
  std::optional<int64_t> worker, workerOffset, globalBatch;

  // Parameter-server tasks (PsPart).
  std::optional<int64_t> ps;
  std::optional<bool> psAsync;
  std::optional<Strings> psVariables;
  std::optional<Ints> psOwners;
  std::optional<int64_t> psTask;

  CheckpointPosition checkpoint;

  /// Keys graphc does not read, as they came.
  Attrs other;

  /// The module header's form, keys in name order.
  Attrs toAttrs() const;
  /// Reads a module header's meta; errors start "module meta: " and name the
  /// key ("module meta: attribute 'batch' must be a positive integer, found
  /// \"x\"").
  static llvm::Expected<PlanInfo> fromAttrs(const Attrs &meta);

  /// The integer facts (batch, seed, towers, ...), which ONNX exports carry
  /// as metadata and imports read back through fromAttrs.
  Attrs integerFacts() const;

  friend bool operator==(const PlanInfo &a, const PlanInfo &b) {
    return a.toAttrs() == b.toAttrs();
  }
};

/// The verifier's check of a module built in memory: what fromAttrs would
/// say of its text form.
llvm::Error checkPlanInfo(const PlanInfo &plan);

} // namespace graphc
