//===- FlagGroups.h - The flags both tools share, declared once -*- C++ -*-===//
//
// A flag that means the same in `graphc` and `graphrun` is declared here, in
// a group, with one help text; each subcommand adds the groups it takes and
// then asks the group to check its values into the typed options (the rules
// themselves are in tools/driver/RunChecks.h). The groups:
//
//   MemoryLimitFlag    --memory-limit (every subcommand of both tools)
//   ModelSourceFlags   MODEL, --model and a built-in model's flags
//   PlacementFlags     --gpus, --cluster, --gpu-model, the tower modes,
//                      --strategy, --bucket-mb, --accumulate, --recompute
//   addGpuModelFlag    --gpu-model (also graphc simulate's scaling table)
//   TaskFlags          --workers, --tasks, --ps, --ps-async
//   addOptimizerFlag   --optimizer
//   addDumpFlags       --dump-dir and the pass manager's other dumps
//   TrainingFlags      a run's length and its hyper-parameters (graphrun)
//   SyntheticDataFlags --synthetic-samples, --synthetic-classes (graphrun)
//   CpuFlags           --threads, --conv-algorithm, --cpu-layout (graphrun)
//   GpuLayoutFlag      --gpu-layout (graphrun train)
//   ExportFlags        -o and --training-graph (both tools' `export`)
//
// A group checks its flags in steps the tools call in the order they always
// have, so that a command line with two wrong flags names the same one.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "frontend/onnx/OnnxExporter.h"
#include "passes/strategy/CompileRequest.h"
#include "tools/driver/CalibratedGpu.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/RunChecks.h"
#include "tools/driver/WorldSize.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace CLI {
class App;
class Option;
} // namespace CLI

namespace graphc {

struct TrainOptions;
struct SyntheticData;

/// The help of a MODEL argument: every file loadModel reads.
inline constexpr const char *kModelFileHelp =
    "ONNX model, .gir text, graphc module file or checkpoint";

/// --memory-limit SIZE, given before or after the subcommand.
struct MemoryLimitFlag {
  std::optional<std::string> size;

  void add(CLI::App &app);
  /// Sets the limit when the flag was given.
  llvm::Error apply() const;
};

/// The model a subcommand reads: a file (MODEL) or a built-in model (--model
/// NAME, with --num-classes, --image-size, --aux-logits and, for training,
/// --dropout).
struct ModelSourceFlags {
  std::string path, name;
  ModelFlags flags;

  void add(CLI::App *cmd, bool dropout = false);
  /// Checks the built-in model's flags (applyModelFlags) into `spec`, with
  /// the path and name.
  llvm::Error applyTo(ModelSpec &spec) const;
};

/// The tower modes as a command line spells them (--params, --bn,
/// --remainder, --split; empty split: even shares).
struct TowerModeFlags {
  std::string params = "cpu", bn = "local", remainder = "uneven", split, precision = "fp32";
  std::string loss; ///< --loss (passes/AddLoss.h); empty: not given
  /// --loss-scale (empty: off, or kDefaultFp16LossScale with fp16) and
  /// --loss-scale-interval.
  std::string lossScale, lossScaleInterval = "2000";
};
/// Parses them once into the typed options; an error names the flag.
llvm::Error parseTowerModes(const TowerModeFlags &flags, CompileOptions &into);

/// --gpu-model NAME | auto | none: whose calibrated figures --gpus N takes
/// (tools/driver/CalibratedGpu.h).
void addGpuModelFlag(CLI::App *cmd, std::string &model);

/// The devices of a compile and how its towers use them: --gpus, --cluster,
/// --gpu-model, --params, --bn, --precision, --loss, --loss-scale, --loss-scale-interval,
/// --remainder, --split, --strategy, --bucket-mb, --accumulate, --recompute.
class PlacementFlags {
public:
  /// --gpus and --cluster go to `place`; the others are kept here until
  /// apply().
  void add(CLI::App *cmd, PlacementRequest &place);
  /// --bucket-mb (checkBucketMb).
  llvm::Error checkBucket() const;
  /// The bucket cap, the tower modes, the strategy and the micro-batches
  /// into `options` and `place`; an error names the flag.
  llvm::Error apply(CompileOptions &options, PlacementRequest &place) const;
  /// --loss-scale was given (a compiled plan keeps its own).
  bool lossScaleGiven() const;
  /// --gpu-model into place.calibratedFile, for --gpus without --cluster;
  /// `emulated`: the run maps its GPUs onto CPU devices (auto finds none).
  llvm::Error findCalibrated(PlacementRequest &place, bool emulated);
  /// What findCalibrated found (its note, where a GPU has no file).
  const CalibratedGpu &calibrated() const { return calibrated_; }

private:
  TowerModeFlags modes_;
  std::string gpuModel_ = "auto";
  CLI::Option *gpuModelOption_ = nullptr;
  CalibratedGpu calibrated_;
  std::string strategy_ = "data-parallel", accumulate_ = "1", recompute_ = "off";
  double bucketMb_ = 25;
  bool shardOptimizer_ = false;
  CLI::Option *bucketOption_ = nullptr, *lossScaleOption_ = nullptr;
  int microBatches_ = 1;
  std::string schedule_ = "1f1b";
  CLI::Option *microBatchesOption_ = nullptr, *stagesOption_ = nullptr,
              *scheduleOption_ = nullptr;
  /// --micro-batches, --stages and --pipeline-schedule: only with
  /// --strategy pipeline.
  llvm::Error applyPipeline(CompileOptions &options, const PlacementRequest &place) const;
};

/// What the tasks of a run are for: a plan to write (its chief and workers
/// need GPUs to place towers on), or a run to train (TF_CONFIG gives them
/// when neither --tasks nor --workers does).
enum class TasksFor { Placement, Training };

/// The processes of a run: --workers, --tasks, --ps, --ps-async.
class TaskFlags {
public:
  void add(CLI::App *cmd, PlacementRequest &place, TasksFor use);
  /// --tasks FILE into `place` (or TF_CONFIG, for training); each task
  /// without "gpus" gets --gpus. --tasks with --workers is an error.
  llvm::Error readTasks(PlacementRequest &place) const;
  /// What gives a training run its workers: --workers, the tasks, or the
  /// launcher, whose processes that are not ps tasks train (at least one;
  /// tools/driver/WorldSize.h checks the plan against the world).
  WorkersSource workersFrom(PlacementRequest &place, const LaunchedWorld &launched) const;

private:
  std::string file_;
  TasksFor use_ = TasksFor::Training;
  CLI::Option *workersOption_ = nullptr;
};

/// --optimizer.
void addOptimizerFlag(CLI::App *cmd, std::string &optimizer);

/// Which of the pass manager's dumps a subcommand offers.
enum class DumpFlagSet {
  DumpDir,   ///< --dump-dir alone
  Passes,    ///< and --print-ir-after-all, --print-ir-after, --time-passes
  Placement, ///< and --dump-dot; --time-passes also times reading and writing
};
void addDumpFlags(CLI::App *cmd, DumpOptions &dump, DumpFlagSet set);

/// A training run's length and its hyper-parameters: --steps, --epochs,
/// --more-steps, --optimizer, --lr, --lr-schedule, --momentum, --nesterov,
/// --weight-decay, --scale-lr.
void addTrainingFlags(CLI::App *cmd, TrainOptions &t);

/// --synthetic-samples, --synthetic-classes.
void addSyntheticDataFlags(CLI::App *cmd, SyntheticData &data);

/// --threads: checked, then 0 (every core) when not given.
llvm::Expected<int> threadsFrom(const std::optional<int64_t> &given);

/// The CPU flags of the subcommands that run graphs: --threads,
/// --conv-algorithm, --cpu-layout.
struct CpuFlags {
  std::optional<int64_t> threads;
  std::string convAlgorithm = "auto";
  std::string layout = "auto"; ///< --cpu-layout (kernels/ChannelsLast.h)

  void add(CLI::App *cmd, llvm::StringRef threadsHelp);
  /// Checks the flags into `exec`.
  llvm::Error apply(ExecutorOptions &exec) const;
};

/// --gpu-layout nchw|nhwc|auto: which 4-d activations GPU devices keep
/// channels-last (kernels/ChannelsLast.h).
struct GpuLayoutFlag {
  std::string layout = "auto";

  void add(CLI::App *cmd);
  /// Parses the flag into `exec`; an unknown word is one error naming it.
  llvm::Error apply(ExecutorOptions &exec) const;
};

/// What an `export` writes: -o FILE and --training-graph (the inference form
/// otherwise, frontend/onnx/OnnxExporter.h).
struct ExportFlags {
  std::string output;
  bool trainingGraph = false;

  void add(CLI::App *cmd);
  ExportForm form() const { return trainingGraph ? ExportForm::Training : ExportForm::Inference; }
};

} // namespace graphc
