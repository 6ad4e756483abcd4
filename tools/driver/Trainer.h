//===- Trainer.h - The training loop behind `graphrun train` -----*- C++ -*-===//
//
// runTraining does what `graphrun train` promises, in order:
//   1. load the forward model, open the data set, check that labels fit the
//      logits and that the checkpoint directory is writable — all before any
//      training step;
//   2. compile the training module and bind an executor (restoring a
//      checkpoint with --resume, strictly);
//   3. print the run plan; then step: feed a batch and the learning rate,
//      run, report loss and images/s on a progress line and in the metrics
//      file, checkpoint every K steps and at the end;
//   4. evaluate on the test split after every epoch when the data set has one;
//   5. print a summary that separates input waiting from compute, and says so
//      when the input pipeline is the bottleneck.
// A short last batch of an epoch is dropped in training (each epoch reshuffles,
// so every sample is used over the epochs); evaluation counts every sample.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "tools/driver/Compile.h"
#include "tools/driver/ModelSource.h"

#include "llvm/Support/raw_ostream.h"

namespace graphc {

/// The synthetic data set's size. Its labels use the first `classes` of the
/// model's classes (0: all of them), so that a short run on a 1000-class model
/// shows learning: with every class in play, 50 steps of 16 see each class less
/// than once and the loss cannot fall.
struct SyntheticData {
  int64_t samples = 4096;
  int64_t classes = 10;
};

struct TrainOptions {
  ModelSpec model;
  CompileRequest compile; ///< options.batch is the global batch
  /// --gpus N / --cluster FILE: compile for several devices (one tower each).
  PlacementRequest placement;
  /// Run a plan's GPUs on CPU devices (or on fewer physical GPUs).
  bool emulate = false;
  std::string data = "synthetic";
  SyntheticData synthetic;
  int64_t steps = 0;  ///< stop after this many steps (0: use epochs)
  int64_t epochs = 0; ///< or after this many epochs
  /// constant | step:EVERY_EPOCHS:FACTOR | cosine
  std::string lrSchedule = "constant";
  /// Multiply the learning rate by the number of towers (explicit LR scaling).
  bool scaleLrByTowers = false;
  std::string checkpointDir;
  int64_t checkpointEvery = 0; ///< steps; 0: only at the end
  bool resume = false;
  std::string metricsPath; ///< .jsonl or .csv
  bool evaluate = true;    ///< test accuracy after each epoch when the data set has a test split
  int64_t evalBatch = 0;   ///< 0: the training batch
  ExecutorOptions executor;
  int loaderThreads = 2;
  std::string tracePath;   ///< Chrome trace of the profiled steps
  std::string profilePath; ///< per-op time table (text)
  bool progress = true;
};

struct EpochResult {
  int64_t epoch = 0;
  double testAccuracy = -1, testLoss = 0;
};

struct TrainResult {
  int64_t steps = 0;
  double firstLoss = 0, lastLoss = 0;
  double imagesPerSecond = 0;
  double inputWaitSeconds = 0, stepSeconds = 0;
  std::vector<double> losses;
  std::vector<EpochResult> epochs;
  std::string lastCheckpoint;
};

llvm::Expected<TrainResult> runTraining(const TrainOptions &opts, llvm::raw_ostream &out);

struct EvalResult {
  int64_t samples = 0, correct = 0;
  double loss = 0; ///< mean cross-entropy
  double accuracy() const { return samples ? (double)correct / samples : 0; }
};

/// Evaluates a forward model (carrying its trained values in Variable::data,
/// e.g. from a checkpoint) on a data set split.
llvm::Expected<EvalResult> runEvaluation(const Module &forward, llvm::StringRef data,
                                         bool testSplit, int64_t batch,
                                         const ExecutorOptions &exec,
                                         const SyntheticData &synthetic = {});

} // namespace graphc
