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

#include "tools/driver/TrainOptions.h"

#include "llvm/Support/raw_ostream.h"

namespace graphc {

class Workers;

/// Trains in `workers`, the world of processes (executor/dist/Workers.h) the tool
/// started; only its chief writes to `out`.
llvm::Expected<TrainResult> runTraining(const TrainOptions &opts, llvm::raw_ostream &out,
                                        Workers &workers);

/// Evaluates a forward model (carrying its trained values in Variable::data,
/// e.g. from a checkpoint) on a data set split.
llvm::Expected<EvalResult> runEvaluation(const Module &forward, llvm::StringRef data,
                                         bool testSplit, int64_t batch, const ExecutorOptions &exec,
                                         const SyntheticData &synthetic = {});

} // namespace graphc
