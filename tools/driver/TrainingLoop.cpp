//===- TrainingLoop.cpp - The steps of a TrainingSession ------------------===//
//
// trainSteps and what it calls: an update (its micro-batches, then the main
// graph), the exchange with the ps tasks and the agreement on stopping, the
// step's metrics, evaluation after every epoch, checkpoints; then finishRun.
//
//===----------------------------------------------------------------------===//
#include "tools/driver/TrainingSession.h"

#include "executor/dist/Workers.h"
#include "ir/Diagnostics.h"
#include "passes/AccumulateGradients.h"
#include "tools/driver/Evaluator.h"
#include "tools/driver/Progress.h"
#include "tools/driver/TensorBoard.h"
#include "tools/driver/TrainingData.h"

#include "llvm/Support/Format.h"

#include <chrono>
#include <cmath>
#include <csignal>

namespace graphc {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

} // namespace

llvm::Error TrainingSession::trainSteps() {
  progress_ = std::make_unique<ProgressLine>(llvm::errs(), totalSteps_,
                                             opts_.progress && workers_.chief(), start_);
  scaling_ = compiled_->plan().lossScale.has_value();
  if (scaling_) {
    auto s = lossScaleState();
    if (!s)
      return s.takeError();
    std::tie(totals_.scaleBefore, totals_.skippedBefore) = *s;
  }
  lastSaved_ = ckpt_ ? ckpt_->info.step : UINT64_MAX;
  loader_->startEpoch(epoch_, position_);
  // Every rank stops after the same step, when any of them is signalled (one
  // process alone may stop before its first).
  bool stopping = plannedWorkers_ == 1 && stopSignal() != 0;
  while ((int64_t)executor_->step() < totalSteps_ && !stopping) {
    if (several_)
      workers_.setStep(executor_->step());
    // 0-based here; messages, progress and metrics count steps from 1.
    const int64_t step = executor_->step();
    // An update's micro-batches come from one epoch: an epoch whose rest
    // holds fewer ends here, as a short last batch does.
    if (accumulate_ > 1 && microPerEpoch_ - loader_->position().batches < accumulate_) {
      if (auto e = evaluateEpoch())
        return e;
      loader_->startEpoch(++epoch_);
    }
    auto update = runUpdate(step);
    if (!update)
      return update.takeError();
    auto stop = completeStep(step, *update);
    if (!stop)
      return stop.takeError();
    stopping = *stop;
  }
  return llvm::Error::success();
}

llvm::Expected<TrainingSession::Update> TrainingSession::runUpdate(int64_t step) {
  // The update: micro-steps, then main with the last micro-batch. An epoch
  // that ends early (samples that failed to load) lets the update go on in
  // the next.
  Update u;
  const TensorType &inputType = input_->result()->type().bound(part_.count);
  for (unsigned k = 0; k < accumulate_;) {
    auto b = loader_->next();
    if (!b)
      return withContext(b.takeError(), "step " + llvm::Twine(step + 1));
    if (!*b) {
      if (auto e = evaluateEpoch())
        return withContext(std::move(e), "after step " + llvm::Twine(step));
      loader_->startEpoch(++epoch_);
      continue;
    }
    const bool last = ++k == accumulate_;
    llvm::StringMap<Tensor> feeds;
    feeds[input_->name()] = toModelInput((*b)->inputs, inputType);
    feeds["labels"] = (*b)->labels;
    if (last) {
      u.lr = schedule_.at(step, totalSteps_, epoch_) * lrScale();
      feeds["lr"] = Tensor::scalar((float)u.lr);
    }
    auto start = Clock::now();
    auto ran = last ? executor_->run(feeds) : executor_->run(kMicroGraph, feeds);
    if (!ran) {
      std::string where = "step ";
      where += std::to_string(step + 1);
      if (accumulate_ > 1)
        where += ", micro-batch " + llvm::Twine(k).str() + " of " + llvm::Twine(accumulate_).str();
      return withContext(ran.takeError(), where);
    }
    u.runSeconds += seconds(start, Clock::now());
    u.parts += executor_->lastStepTimes();
    if (last)
      u.outputs = std::move(*ran);
  }
  if (opts_.kernelTimes && totals_.afterFirst.empty())
    for (const NodeProfile &p : executor_->profile())
      totals_.afterFirst[p.node] = {p.seconds, p.runs};
  return u;
}

llvm::Expected<bool> TrainingSession::completeStep(int64_t step, Update &u) {
  auto at = [step] { return "step " + std::to_string(step + 1); };
  // Parameter-server tasks: the gradients go to them, the variables of the
  // next step come back.
  std::optional<uint64_t> staleness;
  auto t1 = Clock::now();
  if (ps_) {
    auto s = ps_->exchange(step, u.lr, u.outputs, *executor_);
    if (!s)
      return withContext(s.takeError(), at());
    staleness = *s;
    totals_.stalenessSum += *s;
    totals_.stalenessMax = std::max(totals_.stalenessMax, *s);
  }
  // Every rank stops after the same step (asynchronous workers share no
  // step: each stops on its own signal). The agreement is part of the step.
  bool stop = stopSignal() != 0;
  if (!async_) {
    auto any = workers_.collectives().any(stop, "agreeing whether to stop");
    if (!any)
      return withContext(any.takeError(), at());
    stop = *any;
  }
  auto t2 = Clock::now();
  double dt = u.runSeconds + seconds(t1, t2);
  StepTimes &parts = u.parts;
  // The exchange and the agreement are between workers; the rest of the
  // step outside run() (reading its outputs) is compute.
  if (ps_ || plannedWorkers_ > 1)
    parts.interWorker += seconds(t1, t2);
  parts.compute = std::max(0.0, dt - parts.input - parts.intraWorker - parts.interWorker);
  double loss = u.outputs[0].at(0);
  // Asynchronous workers do not sum their losses: this one's part, as a
  // mean over its own samples.
  if (async_)
    loss *= (double)batch_ / (double)part_.count;
  if (!std::isfinite(loss))
    return makeError("step " + llvm::Twine(step + 1) + ": the loss is " +
                     llvm::Twine(std::isnan(loss) ? "NaN" : "infinite") +
                     "; lower the learning rate, or run with --check-numerics to find the "
                     "first node that produced it");
  double wait = loader_->stats().waitSeconds;
  double stepWait = wait - totals_.waitBefore;
  totals_.waitBefore = wait;
  if (totals_.done++ == 0) {
    totals_.firstStepSeconds = dt;
  } else {
    totals_.steadyParts += parts;
    totals_.steadyWait += stepWait;
  }
  totals_.trainSeconds += dt;
  result_.losses.push_back(loss);
  // The scale's state per step only for the metrics and TensorBoard: reading
  // it waits for the device, which the summary needs once, after the run.
  std::optional<double> scale;
  std::optional<uint64_t> skipped;
  if (scaling_ && (metrics_ || tensorboard_)) {
    auto s = lossScaleState();
    if (!s)
      return withContext(s.takeError(), at());
    scale = s->first;
    skipped = s->second;
  }
  double ips = (double)(batch_ * accumulate_) / dt;
  const std::optional<uint64_t> shownStaleness = async_ ? staleness : std::nullopt;
  progress_->update(step + 1, epoch_, loss, ips, shownStaleness);
  const StepRecord record{step + 1, epoch_, loss,           u.lr,  dt,     ips,
                          stepWait, parts,  shownStaleness, scale, skipped};
  if (metrics_)
    if (auto e = metrics_->step(record))
      return e;
  if (tensorboard_)
    if (auto e = tensorboard_->step(record))
      return e;
  if (opts_.checkpointEvery && (step + 1) % *opts_.checkpointEvery == 0 && step + 1 != totalSteps_)
    if (auto e = chiefAlone("the chief's checkpoint", [this] { return writeCheckpoint(); }))
      return withContext(std::move(e), "after " + at());
  return stop;
}

llvm::Error TrainingSession::chiefAlone(llvm::StringRef what,
                                        llvm::function_ref<llvm::Error()> work) {
  const bool chief = workers_.chief();
  // Asynchronous workers train on meanwhile; after the run the tasks are gone.
  if (ps_ && !ps_->finished() && (chief || !async_))
    if (auto e = ps_->away())
      return e;
  if (chief)
    if (auto e = work())
      return e;
  if (plannedWorkers_ > 1 && !async_)
    return workers_.collectives().meet(("waiting for " + what).str());
  return llvm::Error::success();
}

llvm::Error TrainingSession::evaluateEpoch() {
  if (!chiefEvaluates_)
    return llvm::Error::success();
  return chiefAlone("the chief's evaluation", [this] { return evaluate(); });
}

llvm::Error TrainingSession::evaluate() {
  if (progress_)
    progress_->finish();
  const auto start = Clock::now();
  if (auto e = evaluator_->copyFrom(*executor_))
    return e;
  auto testLoader = DataLoader::create(
      test_, loaderOptionsFor(forward(), *test_, evaluator_->batch(), false, seed_, 2));
  if (!testLoader)
    return testLoader.takeError();
  auto r = evaluator_->run(**testLoader);
  if (!r)
    return r.takeError();
  out_ << "epoch " << epoch_ << ": test " << r->describe() << "\n";
  out_.flush();
  result_.epochs.push_back({epoch_, r->accuracy(), r->loss});
  const std::optional<double> accuracy =
      r->classifies ? std::optional<double>(r->accuracy()) : std::nullopt;
  if (metrics_)
    if (auto e = metrics_->eval(executor_->step(), epoch_, accuracy, r->loss, r->samples,
                                seconds(start, Clock::now())))
      return e;
  if (tensorboard_)
    return tensorboard_->eval(executor_->step(), accuracy, r->loss);
  return llvm::Error::success();
}

llvm::Error TrainingSession::writeCheckpoint() {
  if (!workers_.chief())
    return llvm::Error::success();
  LoaderPosition at = loader_->position();
  CheckpointInfo info{executor_->step(), epoch_, at.batches, at.samples, seed_, batch_, dataId_};
  const unsigned keep = opts_.keepCheckpoints.value_or(kDefaultKeepCheckpoints);
  llvm::Expected<std::string> path = std::string();
  if (ps_) {
    // The variables and slots live in the ps tasks.
    auto tensors = ps_->checkpointTensors(*executor_);
    if (!tensors)
      return tensors.takeError();
    path = saveCheckpointInDir(opts_.checkpointDir, forward(), *tensors, ps_->checkpointLayout(),
                               info, keep);
  } else {
    path = saveCheckpointInDir(opts_.checkpointDir, forward(), *executor_, *compiled_, info, keep);
  }
  if (!path)
    return path.takeError();
  result_.lastCheckpoint = *path;
  lastSaved_ = executor_->step();
  return llvm::Error::success();
}

llvm::Error TrainingSession::finishRun() {
  progress_->finish();
  end_ = executor_->step();
  // The chief waits for every worker to finish and takes the final
  // variables, for evaluation and the last checkpoint.
  if (ps_)
    if (auto e = ps_->finish(*executor_))
      return withContext(std::move(e), "after step " + llvm::Twine(end_));
  result_.stoppedBySignal = end_ < totalSteps_ ? (stopSignal() ? stopSignal() : SIGTERM) : 0;
  // An epoch that ended exactly with the last step is evaluated too.
  if (opts_.epochs && end_ == totalSteps_ && totals_.done > 0)
    if (auto e = evaluateEpoch())
      return withContext(std::move(e), "after step " + llvm::Twine(end_));
  if (!opts_.checkpointDir.empty() && workers_.chief()) {
    if ((uint64_t)end_ != lastSaved_)
      if (auto e = writeCheckpoint())
        return e;
    out_ << "checkpoint " << result_.lastCheckpoint << "\n";
  }
  return llvm::Error::success();
}

} // namespace graphc
