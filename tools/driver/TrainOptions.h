//===- TrainOptions.h - What a training run is asked and answers -*- C++ -*-===//
//
// The options of `graphrun train` as the driver takes them, and what a run
// and an evaluation report (tools/driver/Trainer.h runs them; the session's
// phases, tools/driver/TrainingSession.h, read them).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "passes/strategy/CompileRequest.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/WorldSize.h"

#include <atomic>
#include <optional>

namespace graphc {

/// The synthetic set's size when --synthetic-samples is not given, and the
/// classes of its labels when --synthetic-classes is not (fewer when the model
/// has fewer).
inline constexpr int64_t kDefaultSyntheticSamples = 4096, kDefaultSyntheticClasses = 10;

/// The synthetic data set's size. Its labels use the first `classes` of the
/// model's classes (0: all of them; unset: kDefaultSyntheticClasses or the
/// model's, whichever is fewer), so that a short run on a 1000-class model
/// shows learning: with every class in play, 50 steps of 16 see each class less
/// than once and the loss cannot fall. tools/driver/RunChecks.h holds both to
/// the model.
struct SyntheticData {
  std::optional<int64_t> samples, classes;
};

struct TrainOptions {
  ModelSpec model;
  CompileRequest compile; ///< options.batch is the global batch
  /// --batch was given; without it a model exported with a fixed batch
  /// trains at that batch, any other at options.batch.
  bool batchGiven = true;
  /// --loss-scale was given (a compiled plan keeps its own: asking for
  /// another is refused).
  bool lossScaleGiven = false;
  /// --gpus N / --cluster FILE: compile for several devices (one tower each).
  PlacementRequest placement;
  /// What gave placement.workers, and the world the launcher started
  /// (tools/driver/WorldSize.h).
  WorkersSource workersSource = WorkersSource::Default;
  LaunchedWorld launched;
  /// Run a plan's GPUs on CPU devices (or on fewer physical GPUs).
  bool emulate = false;
  std::string data = "synthetic";
  SyntheticData synthetic;
  /// How long the run is, in all (a resumed run trains what is left):
  std::optional<int64_t> steps;     ///< this many steps
  std::optional<int64_t> epochs;    ///< or this many epochs
  std::optional<int64_t> moreSteps; ///< or this many steps past the checkpoint
  /// constant | step:EVERY_EPOCHS:FACTOR | cosine
  std::string lrSchedule = "constant";
  /// Multiply the learning rate by the number of towers (explicit LR scaling).
  bool scaleLrByTowers = false;
  std::string checkpointDir;
  std::optional<int64_t> checkpointEvery; ///< steps; unset: only at the end
  std::optional<int64_t> keepCheckpoints; ///< step files kept (kDefaultKeepCheckpoints)
  bool resume = false;
  std::string metricsPath;    ///< .jsonl or .csv
  std::string tensorboardDir; ///< TensorBoard event files (TensorBoard.h)
  bool evaluate = true;       ///< test accuracy after each epoch when the data set has a test split
  std::optional<int64_t> evalBatch; ///< unset: the training batch
  ExecutorOptions executor;
  int64_t loaderThreads = 2;
  std::string tracePath;   ///< Chrome trace of the profiled steps
  std::string profilePath; ///< per-op time table (text)
  /// Collect each node's kernel time over the steps after the first
  /// (TrainResult::kernels), for graphrun calibrate.
  bool kernelTimes = false;
  bool progress = true;
  /// Set (to a signal number) by the tool's SIGINT/SIGTERM handler: the run
  /// finishes its step, writes a checkpoint (with checkpointDir) and stops.
  const std::atomic<int> *stopRequested = nullptr;
};

/// Steps a run without --steps, --epochs or --more-steps trains, in all.
inline constexpr int64_t kDefaultSteps = 100;

struct EpochResult {
  int64_t epoch = 0;
  double testAccuracy = -1, testLoss = 0;
};

/// One node's kernel time over the steps after a run's first, with its work
/// at the run's batch (ir/Cost.h).
struct KernelTiming {
  Op op;
  std::string device; ///< the device that ran it ("cpu:2" for an emulated gpu:1)
  int64_t flops = 0, bytes = 0;
  double seconds = 0;
  int64_t runs = 0;
};

struct TrainResult {
  int64_t steps = 0;
  double firstLoss = 0, lastLoss = 0;
  double imagesPerSecond = 0;
  double inputWaitSeconds = 0, stepSeconds = 0;
  /// The steps after the first, together (0 for a run of one step).
  double steadySeconds = 0;
  std::vector<double> losses;
  /// Dynamic loss scaling (0 without): the scale after the run, and the
  /// steps of this run whose gradients were not finite (no update).
  double lossScale = 0;
  int64_t skippedSteps = 0;
  std::vector<EpochResult> epochs;
  std::string lastCheckpoint;
  /// The run had already trained its planned steps; nothing was done.
  bool alreadyComplete = false;
  /// The signal that stopped the run early (0: it ran to its end).
  int stoppedBySignal = 0;
  /// TrainOptions::kernelTimes: every node that ran a kernel.
  std::vector<KernelTiming> kernels;
};

struct EvalResult {
  int64_t samples = 0, correct = 0;
  double loss = 0; ///< the mean of the loss the model trains with (--loss)
  /// A classifier (cross-entropy, nll) has an accuracy; a regression (mse) not.
  bool classifies = true;
  double accuracy() const { return samples ? (double)correct / samples : 0; }
  /// "accuracy 97.50% (39/40), loss 0.1234", or "loss 0.1234 (mse, 40 samples)".
  std::string describe() const;
};

} // namespace graphc
