//===- TrainingSession.h - `graphrun train`, phase by phase ------*- C++ -*-===//
//
// runTraining (tools/driver/Trainer.h) is these phases, in this order; each
// is a function that a test can call on its own, after the ones it needs:
//
//   readModel          the model or compiled plan; flags that a plan already
//                      decides are refused; the plan's processes against the
//                      world's
//   servePsTask        (a parameter-server rank: its whole run, then stop)
//   openData           the training set, the checkpoint directory, the
//                      checkpoint to resume from, the loader, the run's length
//   reportNothingToTrain (when the checkpoint is at the run's end: stop)
//   openMetrics        the chief's metrics file and TensorBoard event file
//   preparePlan        the compiled plan, the same on every rank, this rank's
//                      part of it and of every batch
//   createExecutor     devices (emulated ones too) and the executor
//   restoreCheckpoint  the checkpoint's variables, step, epoch and position
//   createEvaluator    the test split's evaluator (the chief)
//   printRunPlan       what the run will do
//   trainSteps         the step loop, with evaluation after every epoch and
//                      checkpoints every --checkpoint-every steps
//   finishRun          the ps tasks' final state, the last evaluation and
//                      checkpoint
//   report             the summary
//
// The world of processes is a parameter (the tool starts it; a test passes
// the world of one). Only the chief writes to the output.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Checkpoint.h"
#include "executor/data/DataLoader.h"
#include "passes/WorkerPart.h"
#include "tools/driver/LrSchedule.h"
#include "tools/driver/PsTask.h"
#include "tools/driver/TrainOptions.h"

#include "llvm/ADT/DenseMap.h"

#include <memory>
#include <optional>

namespace graphc {

class Evaluator;
class MetricsWriter;
class ProgressLine;
class TensorBoardWriter;
class Workers;

class TrainingSession {
public:
  /// Checks the options (checkTrainOptions, --lr-schedule).
  static llvm::Expected<std::unique_ptr<TrainingSession>>
  create(const TrainOptions &opts, Workers &workers, llvm::raw_ostream &chiefOut);
  ~TrainingSession();

  llvm::Error readModel();
  /// This rank is one of the plan's parameter-server tasks.
  bool isPsTask() const;
  llvm::Error servePsTask();
  llvm::Error openData();
  /// The checkpoint is at the run's last step or past it.
  bool nothingToTrain() const { return start_ >= totalSteps_; }
  TrainResult reportNothingToTrain();
  llvm::Error openMetrics();
  llvm::Error preparePlan();
  llvm::Error createExecutor();
  llvm::Error restoreCheckpoint();
  llvm::Error createEvaluator();
  void printRunPlan();
  llvm::Error trainSteps();
  /// The test split's accuracy after an epoch (the chief, when the data
  /// set has a test split; the other ranks wait for it, chiefAlone).
  llvm::Error evaluateEpoch();
  /// A checkpoint of the executor's state (the chief; nothing on the other
  /// ranks).
  llvm::Error writeCheckpoint();
  llvm::Error finishRun();
  llvm::Error report();

  const Executor &executor() const { return *executor_; }
  const TrainResult &result() const { return result_; }
  TrainResult takeResult() { return std::move(result_); }
  int64_t totalSteps() const { return totalSteps_; }
  int64_t epoch() const { return epoch_; }
  const LoaderPosition &position() const { return position_; }

private:
  /// One update's run: its micro-batches, then the main graph.
  struct Update {
    double lr = 0, runSeconds = 0;
    StepTimes parts;
    std::vector<Tensor> outputs;
  };
  /// Summed over the steps of this run.
  struct Totals {
    int64_t done = 0;
    double trainSeconds = 0, waitBefore = 0, firstStepSeconds = 0;
    /// Over the steps after the first (which holds one-time work).
    StepTimes steadyParts;
    double steadyWait = 0;
    uint64_t stalenessSum = 0, stalenessMax = 0;
    /// Dynamic loss scaling before the first step.
    double scaleBefore = 0;
    uint64_t skippedBefore = 0;
    /// TrainOptions::kernelTimes: each node's profile after the first step.
    llvm::DenseMap<const Node *, std::pair<double, int64_t>> afterFirst;
  };

  TrainingSession(const TrainOptions &opts, Workers &workers, llvm::raw_ostream &out,
                  LrSchedule schedule);

  const Module &forward() const { return *loaded_.forward; }
  int stopSignal() const;
  /// A compiled plan decides accumulation, precision, loss scaling and ps
  /// tasks: flags that ask otherwise are refused.
  llvm::Error checkFlagsAgainstPlan();
  /// A model ending in Softmax or LogSoftmax trains on its logits
  /// (passes/AddLoss.h): a note for the run plan.
  void noteProbabilityHead();
  /// The loss: --loss, else the one the model records (a checkpoint's, a
  /// plan's), else cross-entropy; kept in the forward module's plan, so the
  /// compile, evaluation and checkpoints use it.
  llvm::Error resolveLoss();
  /// A model exported for inference trains as exported, not as written
  /// (passes/TrainingMode.h, inferenceExportSigns): a note for the run plan.
  void noteInferenceExport();
  /// The run's length: --steps and --epochs are its total.
  void planLength();
  /// Dynamic loss scaling: the scale and the skipped steps so far.
  llvm::Expected<std::pair<double, uint64_t>> lossScaleState() const;
  /// Data-parallel replicas: the towers, or a pipeline plan's pipelines.
  int replicas() const;
  /// What --scale-lr multiplies the learning rate by: the replicas.
  double lrScale() const;
  llvm::Expected<Update> runUpdate(int64_t step);
  /// After an update: the exchange with the ps tasks, the agreement on
  /// stopping, the step's metrics and checkpoint. Returns whether to stop.
  llvm::Expected<bool> completeStep(int64_t step, Update &update);
  /// Work the chief does alone (evaluation, a checkpoint), however long it
  /// takes: the ps tasks hear that it is away (and so are synchronous
  /// workers, which meet it after without a deadline), so that neither
  /// takes its silence for a stall (--collective-timeout).
  llvm::Error chiefAlone(llvm::StringRef what, llvm::function_ref<llvm::Error()> work);
  /// The chief's evaluation of the test split.
  llvm::Error evaluate();
  void printProcesses();
  void printTrainingSetup();
  llvm::Error reportSteps();
  llvm::Error reportInput();
  llvm::Error writeProfiles();

  const TrainOptions &opts_;
  Workers &workers_;
  llvm::raw_ostream &out_;
  LrSchedule schedule_;
  std::vector<std::string> notes_; ///< printed with the run plan

  // readModel
  LoadedModel loaded_;
  std::unique_ptr<Module> precompiled_;
  std::optional<TaskCluster> tasks_;
  unsigned plannedWorkers_ = 1, plannedPs_ = 0, accumulate_ = 1;
  bool several_ = false;
  // openData
  int64_t batch_ = 0;
  uint64_t seed_ = 0;
  std::string dataId_;
  const Node *input_ = nullptr;
  std::shared_ptr<const Dataset> train_;
  std::optional<LoadedCheckpoint> ckpt_;
  LoaderOptions loading_;
  std::unique_ptr<DataLoader> loader_;
  int64_t microPerEpoch_ = 0, perEpoch_ = 0, start_ = 0, totalSteps_ = 0;
  TrainResult result_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  // preparePlan
  std::unique_ptr<Module> compiled_;
  WorkerSlice part_;
  std::unique_ptr<PsWorker> ps_;
  int towersInAll_ = 1;
  Ints workerTowers_;
  bool async_ = false;
  // createExecutor, restoreCheckpoint, createEvaluator
  ExecutorOptions exec_;
  std::string emulation_;
  /// The executor's CUDA graph note when the run plan was printed.
  std::string graphNote_;
  std::unique_ptr<Executor> executor_;
  int64_t epoch_ = 0;
  LoaderPosition position_;
  std::unique_ptr<Evaluator> evaluator_;
  bool chiefEvaluates_ = false; ///< every rank knows it
  std::shared_ptr<const Dataset> test_;
  // trainSteps, finishRun
  std::unique_ptr<ProgressLine> progress_;
  bool scaling_ = false;
  uint64_t lastSaved_ = UINT64_MAX;
  Totals totals_;
  int64_t end_ = 0;
};

} // namespace graphc
