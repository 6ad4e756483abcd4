#include "tools/driver/TrainingSession.h"

#include "executor/data/OpenDataset.h"
#include "executor/dist/Workers.h"
#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "passes/AccumulateGradients.h"
#include "passes/AddLoss.h"
#include "passes/PsPart.h"
#include "passes/TrainingMode.h"
#include "passes/WorkerPart.h"
#include "passes/strategy/CompiledModule.h"
#include "passes/strategy/FitAdvisor.h"
#include "passes/strategy/PipelineStrategy.h"
#include "tools/driver/Emulation.h"
#include "tools/driver/Evaluator.h"
#include "tools/driver/PrecisionRuns.h"
#include "tools/driver/Progress.h"
#include "tools/driver/RunChecks.h"
#include "tools/driver/TensorBoard.h"
#include "tools/driver/TrainingData.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/xxhash.h"

namespace graphc {

namespace {

/// What every rank of a multi-worker run must hold alike: the plan's text
/// and its variables' values.
uint64_t planHash(const Module &plan) {
  uint64_t h = llvm::xxHash64(toText(plan));
  for (const Variable &v : plan.variables())
    if (!v.data.empty())
      h ^= llvm::xxHash64(llvm::StringRef((const char *)v.data.raw(), v.data.bytes())) +
           0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

/// The run's plan: the module as loaded when it was compiled already,
/// otherwise the model compiled as the options ask (passes/strategy).
llvm::Expected<std::unique_ptr<Module>> planFor(const TrainOptions &opts, const Module &forward,
                                                std::unique_ptr<Module> precompiled,
                                                int64_t batch) {
  if (precompiled)
    return precompiled;
  auto advisor = FitAdvisorOptions::fromEnvironment();
  if (!advisor)
    return advisor.takeError();
  CompileRequest request = opts.compile;
  request.options.batch = batch;
  request.options.loss = forward.plan().loss; // resolved by readModel
  return compileThatFits(forward, request, opts.placement, *advisor);
}

} // namespace

TrainingSession::TrainingSession(const TrainOptions &opts, Workers &workers, llvm::raw_ostream &out,
                                 LrSchedule schedule)
    : opts_(opts), workers_(workers), out_(out), schedule_(schedule) {}

TrainingSession::~TrainingSession() = default;

llvm::Expected<std::unique_ptr<TrainingSession>>
TrainingSession::create(const TrainOptions &opts, Workers &workers, llvm::raw_ostream &chiefOut) {
  if (auto e = checkTrainOptions(opts))
    return e;
  auto schedule = LrSchedule::parse(opts.lrSchedule, opts.compile.options.learningRate);
  if (!schedule)
    return schedule.takeError();
  llvm::raw_ostream &out = workers.chief() ? chiefOut : llvm::nulls();
  return std::unique_ptr<TrainingSession>(new TrainingSession(opts, workers, out, *schedule));
}

int TrainingSession::stopSignal() const {
  return opts_.stopRequested ? opts_.stopRequested->load() : 0;
}

llvm::Error TrainingSession::readModel() {
  ModelSpec spec = opts_.model;
  spec.batch = opts_.compile.options.batch;
  spec.keepFixedBatch = !opts_.batchGiven;
  auto loaded = loadModel(spec);
  if (!loaded)
    return loaded.takeError();
  loaded_ = std::move(*loaded);
  if (!loaded_.batchNote.empty())
    notes_.push_back(loaded_.batchNote);
  // A module `graphc compile` or `graphc place` wrote is already a training
  // step; its forward graph serves evaluation and checkpoints.
  const PlacementRequest &place = opts_.placement;
  if (isCompiledForTraining(*loaded_.forward)) {
    precompiled_ = std::move(loaded_.forward);
    auto fwd = forwardOf(*precompiled_);
    if (!fwd)
      return fwd.takeError();
    loaded_.forward = std::move(*fwd);
    const bool fromEnvironment = place.tasksSource == "TF_CONFIG";
    // The launcher's count is no --workers given to a plan with its own.
    const bool workersGiven = place.workers > 1 && opts_.workersSource != WorkersSource::Launcher;
    if (place.gpus > 0 || !place.clusterFile.empty() || workersGiven ||
        (place.tasks && !fromEnvironment))
      return makeError("'" + opts_.model.path +
                       "' is already compiled; --gpus, --cluster, --workers and --tasks apply "
                       "to models");
    if (place.tasks)
      notes_.push_back("TF_CONFIG is not read: the plan '" + opts_.model.path +
                       "' records its own workers");
  }
  // The global batch: a compiled plan's, a fixed-batch model's when no
  // --batch was given, else --batch (or its default).
  batch_ = precompiled_ && precompiled_->batch()                   ? *precompiled_->batch()
           : !precompiled_ && !opts_.batchGiven && forward().batch() ? *forward().batch()
                                                                   : opts_.compile.options.batch;
  tasks_ = place.tasks;
  if (precompiled_) {
    tasks_ = precompiled_->plan().tasks;
  }
  plannedWorkers_ = precompiled_ ? planWorkers(*precompiled_)
                    : tasks_     ? tasks_->numWorkers()
                                 : (unsigned)std::max(1, place.workers);
  plannedPs_ = precompiled_ ? planPsTasks(*precompiled_) : place.psTasks();
  // Micro-batches per update: the plan's, or --accumulate's.
  accumulate_ = opts_.compile.options.accumulate;
  if (precompiled_)
    if (auto e = checkFlagsAgainstPlan())
      return e;
  const WorkersSource source = precompiled_ ? WorkersSource::Default : opts_.workersSource;
  if (auto e = checkWorldSize(plannedWorkers_, plannedPs_, source, opts_.launched, workers_.size()))
    return e;
  several_ = plannedWorkers_ > 1 || plannedPs_ > 0;
  if (auto e = resolveLoss())
    return e;
  noteProbabilityHead();
  noteInferenceExport();
  return llvm::Error::success();
}

llvm::Error TrainingSession::resolveLoss() {
  const std::optional<LossKind> asked = opts_.compile.options.loss;
  std::optional<LossKind> loss = precompiled_ ? precompiled_->plan().loss : forward().plan().loss;
  if (precompiled_ && asked && *asked != loss.value_or(LossKind::CrossEntropy))
    return makeError("'" + opts_.model.path + "' is already compiled; --loss applies to models " +
                     "(the plan trains with " + modeName(loss.value_or(LossKind::CrossEntropy)) +
                     ")");
  if (asked)
    loss = asked;
  if (loss == LossKind::CrossEntropy)
    loss.reset();
  loaded_.forward->plan().loss = loss;
  return llvm::Error::success();
}

void TrainingSession::noteInferenceExport() {
  InferenceExportSigns signs = inferenceExportSigns(*loaded_.forward);
  if (opts_.compile.options.bn == BnMode::Frozen)
    signs.frozenBatchNorms = 0; // asked for
  if (!signs.any())
    return;
  std::string what;
  if (signs.frozenBatchNorms == 1)
    what = "its BatchNorm '" + signs.firstFrozen + "' is in inference form: it trains frozen";
  else if (signs.frozenBatchNorms > 1)
    what = std::to_string(signs.frozenBatchNorms) + " BatchNorms are in inference form (the first '" +
           signs.firstFrozen + "'): they train frozen";
  if (signs.frozenBatchNorms > 0)
    what += ", normalising with the running statistics as exported; ";
  if (signs.foldedConvs == 1)
    what += "the convolution weight '" + signs.firstFolded +
            "' came from the exporter, which folded a BatchNorm into it; ";
  else if (signs.foldedConvs > 1)
    what += std::to_string(signs.foldedConvs) + " convolution weights (the first '" +
            signs.firstFolded + "') came from the exporter, which folded BatchNorms into them; ";
  if (signs.convertedBatchNorms == 1)
    what += "the Keras BatchNormalization '" + signs.firstConverted +
            "' was frozen into constants by the converter: it trains as a fixed scale and shift; ";
  else if (signs.convertedBatchNorms > 1)
    what += std::to_string(signs.convertedBatchNorms) +
            " Keras BatchNormalizations (the first '" + signs.firstConverted +
            "') were frozen into constants by the converter: they train as fixed scales and "
            "shifts; ";
  if (signs.dropouts == 0)
    what += "its dropout, if it had any, is gone too; ";
  notes_.push_back("'" + opts_.model.path + "' is an inference export: " + what +
                   "graphrun trains the model as exported. To train the model as written, export "
                   "it in training mode (README, \"Exporting a model to train\")");
}

void TrainingSession::noteProbabilityHead() {
  llvm::ArrayRef<Value *> outputs = loaded_.forward->main().outputs();
  if (outputs.empty() || forward().plan().loss) // nll and mse take the output as it is
    return;
  Value *logits = logitsOf(outputs[0]);
  if (logits == outputs[0])
    return;
  const Node &head = *outputs[0]->producer();
  notes_.push_back("the model ends in " + opName(head.op()).str() + " '" + head.name() +
                   "': the loss is the cross-entropy of its input '" + logits->name() +
                   "' (the logits; for a LogSoftmax, the same as NLL on its output); infer, "
                   "eval and export keep the model's output");
}

llvm::Error TrainingSession::checkFlagsAgainstPlan() {
  const std::string compiled = "'" + opts_.model.path + "' is already compiled; ";
  if (opts_.placement.ps > 0 || opts_.placement.psAsync)
    return makeError(compiled + "--ps and --ps-async apply to models (the plan records its ps "
                                "tasks)");
  auto k = accumulationSteps(*precompiled_);
  if (!k)
    return k.takeError();
  if (accumulate_ != 1)
    return makeError(compiled + "--accumulate applies to models (the plan " +
                     (*k > 1 ? "accumulates " + llvm::Twine(*k) + " micro-batches per update"
                             : llvm::Twine("does not accumulate")) +
                     ")");
  accumulate_ = *k;
  const CompileOptions &co = opts_.compile.options;
  if (co.precision != Precision::FP32) {
    Precision planned = precompiled_->plan().precision.value_or(Precision::FP32);
    if (planned != co.precision)
      return makeError(compiled + "--precision applies to models (the plan computes in " +
                       modeName(planned) + ")");
  }
  if (opts_.lossScaleGiven && precompiled_->plan().lossScale.value_or(0) != co.lossScale) {
    std::string planned = "does not scale its loss";
    if (std::optional<double> scale = precompiled_->plan().lossScale) {
      planned.clear();
      llvm::raw_string_ostream(planned) << llvm::format("scales from %.9g", *scale);
    }
    return makeError(compiled + "--loss-scale applies to models (the plan " + planned + ")");
  }
  return llvm::Error::success();
}

bool TrainingSession::isPsTask() const {
  return plannedPs_ > 0 && workers_.rank() >= plannedWorkers_;
}

llvm::Error TrainingSession::servePsTask() {
  // A parameter-server task reads no data: it compiles the plan, compares it
  // with the other ranks' and serves its shard of the variables.
  std::vector<std::string> ignored;
  std::optional<LoadedCheckpoint> ckpt;
  if (opts_.resume) {
    auto found = loadForResume(opts_.checkpointDir, ignored);
    if (!found)
      return found.takeError();
    ckpt = std::move(*found);
  }
  auto plan = planFor(opts_, forward(), std::move(precompiled_), batch_);
  if (!plan)
    return plan.takeError();
  if (auto e = workers_.collectives().agree(planHash(**plan), "plan"))
    return e;
  if (auto e = workers_.setPsTasks(plannedPs_))
    return e;
  return runPsTask(opts_, **plan, ckpt, workers_);
}

llvm::Error TrainingSession::openData() {
  seed_ = opts_.executor.seed;
  dataId_ = dataIdentity(opts_);
  auto train = openDatasetFor(forward(), opts_.data, Split::Train, opts_.synthetic, seed_);
  if (!train)
    return train.takeError();
  train_ = std::move(*train);
  input_ = *dataInput(forward());
  if (!opts_.checkpointDir.empty())
    if (auto e = checkWritableDir(opts_.checkpointDir))
      return e;
  if (opts_.resume) {
    auto found = loadForResume(opts_.checkpointDir, notes_);
    if (!found)
      return found.takeError();
    ckpt_ = std::move(*found);
    if (!ckpt_)
      notes_.push_back("no checkpoint in '" + opts_.checkpointDir + "' yet: starting from step 0");
  }
  // Checks the data against the batch now; a rank of several workers loads
  // only its part of every batch, with a loader made once its part is known.
  loading_ = loaderOptionsFor(forward(), *train_, batch_, true, seed_, (int)opts_.loaderThreads);
  auto loader = DataLoader::create(train_, loading_);
  if (!loader)
    return loader.takeError();
  loader_ = std::move(*loader);
  // Batches of the loader are micro-batches; a step is an update of
  // `accumulate` of them, all from one epoch.
  microPerEpoch_ = loader_->batchesPerEpoch();
  perEpoch_ = microPerEpoch_ / accumulate_;
  if (perEpoch_ == 0)
    return makeError(
        "data set '" + opts_.data + "' has fewer samples (" + llvm::Twine(train_->size()) +
        ") than one " +
        (accumulate_ > 1 ? "update (" + llvm::Twine(accumulate_) + " x " + llvm::Twine(batch_) + ")"
                         : "batch (" + llvm::Twine(batch_) + ")"));
  planLength();
  return llvm::Error::success();
}

void TrainingSession::planLength() {
  start_ = ckpt_ ? (int64_t)ckpt_->info.step : 0;
  totalSteps_ = opts_.moreSteps ? start_ + *opts_.moreSteps
                : opts_.steps   ? *opts_.steps
                : opts_.epochs  ? *opts_.epochs * perEpoch_
                                : kDefaultSteps;
}

llvm::Error TrainingSession::openMetrics() {
  if (!workers_.chief())
    return llvm::Error::success();
  if (!opts_.metricsPath.empty()) {
    auto m = MetricsWriter::open(opts_.metricsPath, /*append=*/ckpt_.has_value());
    if (!m)
      return m.takeError();
    metrics_ = std::move(*m);
  }
  // A resumed run writes a new file beside the first run's; its steps go on.
  if (!opts_.tensorboardDir.empty()) {
    auto t = TensorBoardWriter::open(opts_.tensorboardDir, start_ + 1);
    if (!t)
      return t.takeError();
    tensorboard_ = std::move(*t);
  }
  return llvm::Error::success();
}

llvm::Error TrainingSession::preparePlan() {
  auto plan = planFor(opts_, forward(), std::move(precompiled_), batch_);
  if (!plan)
    return plan.takeError();
  compiled_ = std::move(*plan);
  // The whole plan's, before a worker cuts its part out of it.
  const RunIdentity identity = runIdentityOf(*compiled_);
  // Several processes: the same plan everywhere, then this rank's part of it.
  part_ = WorkerSlice{0, batch_};
  // The plan's towers, in all and per worker (the rank keeps only its own).
  towersInAll_ = std::max<int>(1, compiled_->plan().towers.value_or(1));
  workerTowers_ = compiled_->plan().workerTowers.value_or(Ints{});
  if (workerTowers_.empty())
    workerTowers_.assign(plannedWorkers_, towersInAll_ / plannedWorkers_);
  if (several_) {
    if (auto e = workers_.collectives().agree(planHash(*compiled_), "plan"))
      return e;
    if (auto e = workers_.setPsTasks(plannedPs_))
      return e;
    if (ckpt_ && plannedPs_)
      if (auto e = checkFits(*ckpt_, *compiled_))
        return e;
  }
  async_ = plannedPs_ > 0 && planPsAsync(*compiled_);
  if (plannedWorkers_ > 1) {
    auto s = workerSlice(*compiled_, workers_.rank());
    if (!s)
      return s.takeError();
    part_ = *s;
    if (auto e = selectWorkerPart(*compiled_, workers_.rank()))
      return e;
    // Asynchronous workers share no step: each keeps to its own rows, and a
    // sample that fails to load moves only its own part.
    auto orFlags = [&across = workers_.collectives(),
                    async = async_](llvm::MutableArrayRef<uint8_t> f) -> llvm::Error {
      if (async)
        return llvm::Error::success();
      return across.orFlags(f, "agreeing which samples failed to load");
    };
    loading_.part = LoaderPart{part_.offset, part_.count, orFlags};
    auto l = DataLoader::create(train_, loading_);
    if (!l)
      return l.takeError();
    loader_ = std::move(*l);
  }
  if (plannedPs_ > 0) {
    auto w = PsWorker::create(*compiled_, workers_);
    if (!w)
      return w.takeError();
    ps_ = std::move(*w);
  }
  if (metrics_)
    metrics_->startRun(identity);
  return checkPlanFitsCluster(*compiled_);
}

llvm::Error TrainingSession::createExecutor() {
  exec_ = opts_.executor;
  if (accumulate_ > 1)
    exec_.graphs = {kMicroGraph.str()};
  if (plannedWorkers_ > 1) {
    exec_.acrossWorkers = &workers_.collectives();
    exec_.gpuAcrossWorkers = &workers_.collectives();
  }
  exec_.profile =
      exec_.profile || !opts_.tracePath.empty() || !opts_.profilePath.empty() || opts_.kernelTimes;
  if (opts_.emulate && isPlaced(*compiled_)) {
    emulation_ = emulateDevices(*compiled_, exec_);
  }
  if (auto e = checkPrecisionRuns(*compiled_, exec_))
    return e;
  if (std::string n = precisionNote(*compiled_, exec_); !n.empty())
    notes_.push_back(std::move(n));
  auto ex = Executor::create(*compiled_, exec_);
  if (!ex)
    return ex.takeError();
  executor_ = std::move(*ex);
  if (!executor_->algorithmNote().empty())
    notes_.push_back(executor_->algorithmNote());
  return llvm::Error::success();
}

llvm::Error TrainingSession::restoreCheckpoint() {
  if (!ckpt_)
    return llvm::Error::success();
  if (auto e =
          ps_ ? restorePartInto(*ckpt_, *executor_) : restoreInto(*ckpt_, *compiled_, *executor_))
    return e;
  result_.lastCheckpoint = ckpt_->path;
  if (std::set<std::string> dropped = unusedSlots(*ckpt_, *compiled_); !dropped.empty())
    notes_.push_back("the checkpoint's optimizer state (" + llvm::join(dropped, ", ") +
                     " per variable) is not used: this run's --optimizer " +
                     opts_.compile.options.optimizer +
                     " keeps none, so its updates start afresh from the checkpoint's weights");
  const CheckpointInfo &i = ckpt_->info;
  epoch_ = i.epoch;
  if (i.seed == seed_ && i.batch == batch_ && i.data == dataId_ && i.epochSamples <= train_->size())
    position_ = {i.epochBatches, i.epochSamples};
  else
    notes_.push_back("the checkpoint's run had seed " + std::to_string(i.seed) + ", batch " +
                     std::to_string(i.batch) + " and data " + i.data + "; this one has seed " +
                     std::to_string(seed_) + ", batch " + std::to_string(batch_) + " and data " +
                     dataId_ + ": epoch " + std::to_string(epoch_) +
                     " starts afresh, and the result will differ from an uninterrupted run");
  return llvm::Error::success();
}

llvm::Error TrainingSession::createEvaluator() {
  auto testSplit = hasTestSplit(opts_.data);
  if (!testSplit)
    return testSplit.takeError();
  chiefEvaluates_ = opts_.evaluate && *testSplit;
  if (opts_.evaluate && !*testSplit && llvm::StringRef(opts_.data).startswith("npz:"))
    notes_.push_back("no evaluation: " + opts_.data + " has no x_test and y_test");
  if (!chiefEvaluates_ || !workers_.chief())
    return llvm::Error::success();
  auto t = openDatasetFor(forward(), opts_.data, Split::Test, opts_.synthetic, seed_);
  if (!t)
    return t.takeError();
  test_ = *t;
  ExecutorOptions evalExec = opts_.executor;
  evalExec.profile = false;
  evalExec.deviceMap = nullptr;
  auto e = Evaluator::create(forward(), opts_.evalBatch.value_or(batch_), evalExec);
  if (!e)
    return e.takeError();
  evaluator_ = std::move(*e);
  return llvm::Error::success();
}

llvm::Expected<std::pair<double, uint64_t>> TrainingSession::lossScaleState() const {
  auto scale = executor_->readVariable(kLossScaleVar);
  if (!scale)
    return scale.takeError();
  auto skipped = executor_->readVariable(kSkippedStepsVar);
  if (!skipped)
    return skipped.takeError();
  return std::pair{scale->at(0), (uint64_t)skipped->at(0)};
}

int TrainingSession::replicas() const {
  // A pipeline's towers are its micro-batches: its replicas are the pipelines.
  std::optional<PipelineShape> p = pipelineShape(*compiled_);
  return p ? (int)p->pipelines : towersInAll_;
}

double TrainingSession::lrScale() const {
  return opts_.scaleLrByTowers ? replicas() : 1;
}

} // namespace graphc
