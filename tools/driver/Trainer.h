//===- Trainer.h - The training loop behind `graphrun train` -----*- C++ -*-===//
//
// runTraining does what `graphrun train` promises, in order (each step is a
// phase of tools/driver/TrainingSession.h):
//   1. load the forward model, open the data set, check that labels fit the
//      logits and that the checkpoint directory is writable — all before any
//      training step;
//   2. compile the training module and bind an executor (restoring a
//      checkpoint with --resume, strictly);
//   3. print the run plan; then step: feed a batch and the learning rate,
//      run, report loss and images/s on a progress line and in the metrics
//      file, checkpoint every K steps, at the end, and when stopped by a
//      signal;
//   4. evaluate on the test split after every epoch when the data set has one;
//   5. print a summary that separates input waiting from compute, and says so
//      when the input pipeline is the bottleneck.
// A short last batch of an epoch is dropped in training (each epoch reshuffles,
// so every sample is used over the epochs); evaluation counts every sample.
//
// --steps and --epochs are the run's total, as TensorFlow's last_step and
// Keras's epochs with initial_epoch: re-running the same command with
// --resume trains what is left, and says so when nothing is. The run's
// position is in the checkpoint (step, epoch, the loader's position in the
// epoch) or derived from the step (the learning rate, dropout streams, the
// optimizers' step counts), so a resumed run ends bit-identical to one that
// was never stopped.
//
// Several workers (`mpirun -np W graphrun train ... --workers W`, a cluster of
// tasks from --tasks FILE or TF_CONFIG, whose workers may have different
// device counts, or a plan placed with either): every rank compiles or loads
// the same plan,
// checks that the plan's workers are mpirun's processes and that every rank
// holds the same plan (a hash compared at start-up), and runs its own part
// of it (passes/WorkerPart.h): its towers, and its contiguous part of every
// global batch, which it alone loads (every rank draws the same shuffled
// order from the seed; the ranks agree which samples failed to load, so the
// global batches are one process's: executor/data/DataLoader.h, point 7).
// Gradients are summed across the workers inside the
// step, so the reported loss and the update are the global batch's. Only the
// chief (rank 0) prints, writes checkpoints, metrics, traces and evaluates;
// every rank stops after the same step when one is signalled.
//
// With parameter-server tasks (--ps P, or ps entries in a cluster), the last
// P ranks hold the variables (tools/driver/PsTask.h): they read no data and
// serve until every worker is done; workers send them their gradient sums
// after every step and take the variables back, and the chief gathers their
// state for checkpoints. --ps-async: workers share no step (no loss sum, no
// agreement on failed samples or stopping) and the chief reports staleness.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "passes/strategy/CompileRequest.h"
#include "tools/driver/ModelSource.h"

#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <optional>

namespace graphc {

class Workers;

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
  /// --loss-scale was given (a compiled plan keeps its own: asking for
  /// another is refused).
  bool lossScaleGiven = false;
  /// --gpus N / --cluster FILE: compile for several devices (one tower each).
  PlacementRequest placement;
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
  std::string metricsPath; ///< .jsonl or .csv
  bool evaluate = true;    ///< test accuracy after each epoch when the data set has a test split
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

/// Trains in `workers`, the world of processes (executor/dist/Workers.h) the tool
/// started; only its chief writes to `out`.
llvm::Expected<TrainResult> runTraining(const TrainOptions &opts, llvm::raw_ostream &out,
                                        Workers &workers);

struct EvalResult {
  int64_t samples = 0, correct = 0;
  double loss = 0; ///< mean cross-entropy
  double accuracy() const { return samples ? (double)correct / samples : 0; }
};

/// Evaluates a forward model (carrying its trained values in Variable::data,
/// e.g. from a checkpoint) on a data set split.
llvm::Expected<EvalResult> runEvaluation(const Module &forward, llvm::StringRef data,
                                         bool testSplit, int64_t batch, const ExecutorOptions &exec,
                                         const SyntheticData &synthetic = {});

} // namespace graphc
