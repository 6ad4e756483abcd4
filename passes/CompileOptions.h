//===- CompileOptions.h - What the tools hand the pass pipeline --*- C++ -*-===//
//
// Each pass takes its own options struct (below, first): what it reads and
// nothing else. CompileOptions is the compile's command line, typed: the
// tools fill it (modes parsed once by ir/Modes.h, devices by
// ir/DeviceId.h), and the pass registry hands each pass the part it reads
// (towerOptions(o), aggregateOptions(o), ...). A knob several passes read
// (the tower count, the BatchNorm mode) is set once here and copied into each
// pass's struct; the per-pass structs hold the defaults.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Modes.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace graphc {

class Module;
class Node;

/// add-loss.
struct LossOptions {
  double auxLossWeight = 0.4; ///< weight of an auxiliary head's loss (inception_v3)
  LossKind kind = LossKind::CrossEntropy; ///< --loss
};

/// add-optimizer.
struct OptimizerOptions {
  std::string optimizer = "momentum"; ///< sgd | momentum | rmsprop | adam
  double momentum = 0.9;
  bool nesterov = false;
  double weightDecay = 0.0;
  double rmspropDecay = 0.9, rmspropMomentum = 0.9, rmspropEpsilon = 1.0;
  double adamBeta1 = 0.9, adamBeta2 = 0.999, adamEpsilon = 1e-8;
};

/// training-mode.
struct TrainingModeOptions {
  BnMode bn = BnMode::Local; ///< frozen keeps BatchNorm in its inference form
  double dropoutSeedSalt = 0;
};

/// replicate-towers (and planBatchSplit).
struct TowerOptions {
  int towers = 1; ///< GPU towers gpu:0..N-1; 0: none (the single-device graph)
  BnMode bn = BnMode::Local;
  RemainderPolicy remainder = RemainderPolicy::Uneven;
  SplitSpec split;
};

/// aggregate-gradients.
struct AggregateOptions {
  int towers = 1;                 ///< 0: no towers were asked for
  ParamPlacement params;          ///< default cpu
  int64_t bucketBytes = 25 << 20; ///< all-reduce bucket cap (mirrored)
  /// --shard-optimizer (mirrored only): each tower updates and keeps the
  /// optimizer slots of 1/N of every variable; reduce-scatter, all-gather.
  bool shardOptimizer = false;
};

/// pipeline-stages (passes/PipelineStages.h): --strategy pipeline.
struct PipelineOptions {
  unsigned stages = 0;       ///< S; 0: not a pipeline plan (the pass refuses)
  unsigned microBatches = 1; ///< M micro-batches per pipeline
  unsigned pipelines = 1;    ///< P pipelines, data parallel (M·P towers)
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  /// The predicted seconds of a node on a stage's device (the step-time
  /// model, from the strategy: passes may not include placement/); unset:
  /// every node counts one.
  std::function<double(const Node &)> seconds;
  /// The predicted seconds of adding two tensors of this many bytes on a
  /// stage's device (a micro-batch's gradient into the sum); unset: 0.
  std::function<double(int64_t)> sumSeconds;
  /// What the cut weighs each stage's seconds by (empty: 1 each): the
  /// strategy raises a stage's whose GPU's memory it overflows, so its run
  /// shrinks.
  std::vector<double> stageWeights;
};

/// mixed-precision.
struct PrecisionOptions {
  Precision precision = Precision::FP32;
};

/// loss-scaling.
struct LossScaleOptions {
  double initial = 0;            ///< the first scale; 0: no loss scaling
  int64_t growthInterval = 2000; ///< finite steps before the scale doubles
};

/// accumulate-gradients.
struct AccumulateOptions {
  unsigned steps = 1; ///< micro-batches per update (--accumulate K); 1: none
};

/// fuse-bn-relu (passes/FuseBatchNormRelu.h).
struct BatchNormReluOptions {
  /// Also each ReluGrad into its batch norm's gradient: plans whose compute
  /// devices are GPUs (the strategies set it from the cluster).
  bool gradients = false;
};

/// shard-over-ps (passes/PsPart.h): the plan's variables sharded over its
/// parameter-server tasks.
struct PsOptions {
  unsigned tasks = 0; ///< ps tasks; 0 is refused (the pass is for plans with some)
  bool async = false; ///< --ps-async: each worker's update applied as it arrives
};

/// place-devices: assigns every node a device. Passes may not depend on
/// placement/, so the strategies (passes/strategy/) build this from the
/// cluster and the kernel registry (placement/Placer.h: makePlacerFunction).
/// Unset: place-devices fails and says so.
using PlacerFunction = std::function<llvm::Error(Module &)>;


/// One device of a placed plan against its memory (the figures of
/// placement/analysis/MemoryNeeds.h).
struct DeviceFit {
  std::string device;
  int64_t need = 0, capacity = 0;
};

/// recompute: like the placer, its measures come from placement/ through the
/// strategies (passes may not depend on it).
struct RecomputeOptions {
  RecomputeMode mode = RecomputeMode::Off;
  /// Every device of a placed module that the cluster describes, with what
  /// its memory plan needs.
  std::function<llvm::Expected<std::vector<DeviceFit>>(const Module &)> measure;
  /// The predicted seconds of one node on its device (the step-time model).
  std::function<double(const Node &)> seconds;
  unsigned accumulate = 1; ///< --accumulate (refused: only graph main is rewritten)
};

struct CompileOptions {
  // bind-batch
  int64_t batch = 0; ///< global batch; 0 keeps the module's own

  // add-loss
  double auxLossWeight = LossOptions().auxLossWeight;
  /// --loss; unset: the one a checkpoint records, else cross-entropy.
  std::optional<LossKind> loss;

  // add-optimizer (the learning rate is an input fed every step)
  std::string optimizer = OptimizerOptions().optimizer;
  double learningRate = 0.01;
  double momentum = OptimizerOptions().momentum;
  bool nesterov = false;
  double weightDecay = 0.0;
  double rmspropDecay = OptimizerOptions().rmspropDecay;
  double rmspropMomentum = OptimizerOptions().rmspropMomentum;
  double rmspropEpsilon = OptimizerOptions().rmspropEpsilon;
  double adamBeta1 = OptimizerOptions().adamBeta1, adamBeta2 = OptimizerOptions().adamBeta2;
  double adamEpsilon = OptimizerOptions().adamEpsilon;

  // training-mode
  double dropoutSeedSalt = 0;

  // mixed-precision
  Precision precision = Precision::FP32;

  // training-mode (bn), replicate-towers, aggregate-gradients
  int towers = TowerOptions().towers;
  BnMode bn = BnMode::Local;
  RemainderPolicy remainder = TowerOptions().remainder;
  SplitSpec split;       ///< --split: per-device batch shares
  ParamPlacement params; ///< --params
  int64_t bucketBytes = AggregateOptions().bucketBytes;
  bool shardOptimizer = false; ///< --shard-optimizer

  // accumulate-gradients
  unsigned accumulate = AccumulateOptions().steps;

  // pipeline-stages (the pipeline strategy fills it)
  PipelineOptions pipeline;

  // loss-scaling
  double lossScale = LossScaleOptions().initial;
  int64_t lossScaleInterval = LossScaleOptions().growthInterval;

  // fuse-bn-relu
  bool fuseBatchNormReluGradients = BatchNormReluOptions().gradients;

  // place-devices
  PlacerFunction placer;

  // recompute (the strategies fill its measures)
  RecomputeOptions recompute;

  // shard-over-ps
  unsigned psTasks = PsOptions().tasks;
  bool psAsync = false;

  uint64_t seed = 0;
};

inline LossOptions lossOptions(const CompileOptions &o) {
  return {o.auxLossWeight, o.loss.value_or(LossKind::CrossEntropy)};
}
inline OptimizerOptions optimizerOptions(const CompileOptions &o) {
  return {o.optimizer,       o.momentum,       o.nesterov,  o.weightDecay, o.rmspropDecay,
          o.rmspropMomentum, o.rmspropEpsilon, o.adamBeta1, o.adamBeta2,   o.adamEpsilon};
}
inline TrainingModeOptions trainingModeOptions(const CompileOptions &o) {
  return {o.bn, o.dropoutSeedSalt};
}
inline TowerOptions towerOptions(const CompileOptions &o) {
  return {o.towers, o.bn, o.remainder, o.split};
}
inline PlacerFunction placerOptions(const CompileOptions &o) {
  return o.placer;
}
inline AggregateOptions aggregateOptions(const CompileOptions &o) {
  return {o.towers, o.params, o.bucketBytes, o.shardOptimizer};
}
inline PipelineOptions pipelineOptions(const CompileOptions &o) {
  return o.pipeline;
}
inline PrecisionOptions precisionOptions(const CompileOptions &o) {
  return {o.precision};
}
inline AccumulateOptions accumulateOptions(const CompileOptions &o) {
  return {o.accumulate};
}
inline LossScaleOptions lossScaleOptions(const CompileOptions &o) {
  return {o.lossScale, o.lossScaleInterval};
}
inline BatchNormReluOptions batchNormReluOptions(const CompileOptions &o) {
  return {o.fuseBatchNormReluGradients};
}
inline RecomputeOptions recomputeOptions(const CompileOptions &o) {
  RecomputeOptions r = o.recompute;
  r.accumulate = o.accumulate;
  return r;
}
inline PsOptions psOptions(const CompileOptions &o) {
  return {o.psTasks, o.psAsync};
}

} // namespace graphc
