//===- TrainingReport.cpp - What a TrainingSession prints ------------------===//
//
// The run plan before the first step, and the summary after the last: loss,
// throughput, where the step time went, the input pipeline, the ps tasks,
// profiles and traces. Only the chief's output stream reaches the user.
//
//===----------------------------------------------------------------------===//
#include "tools/driver/TrainingSession.h"

#include "executor/dist/Workers.h"
#include "ir/Cost.h"
#include "ir/Diagnostics.h"
#include "ir/ModelSummary.h"
#include "ir/Printer.h"
#include "kernels/cpu/CpuBackend.h"
#include "kernels/cpu/CpuIsa.h"
#include "passes/strategy/DataParallelStrategy.h"
#include "passes/strategy/ModelParallelStrategy.h"
#include "passes/strategy/ParamsAutoStrategy.h"
#include "passes/strategy/PipelineStrategy.h"
#include "placement/CostReport.h"
#include "tools/driver/Profile.h"
#include "tools/driver/Progress.h"
#include "tools/driver/RecomputeReport.h"
#include "tools/driver/StepBreakdownTable.h"
#include "tools/driver/TensorBoard.h"
#include "tools/driver/TrainingData.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

#include <csignal>

namespace graphc {

namespace {

std::string humanBytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t)1 << 30)
    snprintf(buf, sizeof(buf), "%.2f GB", b / 1e9);
  else if (b >= (int64_t)1 << 20)
    snprintf(buf, sizeof(buf), "%.1f MB", b / 1e6);
  else
    snprintf(buf, sizeof(buf), "%lld B", (long long)b);
  return buf;
}

std::string withCommas(int64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0)
      out += ',';
    out += s[i];
  }
  return out;
}

const char *signalName(int sig) {
  switch (sig) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  default:
    return "a signal";
  }
}

} // namespace

TrainResult TrainingSession::reportNothingToTrain() {
  for (const std::string &n : notes_)
    out_ << "note: " << n << "\n";
  out_ << "graphrun train: nothing to train: checkpoint '" << ckpt_->path << "' is at step "
       << start_ << (start_ == totalSteps_ ? ", the run's last" : ", past the run's")
       << " (the run is " << totalSteps_ << " steps in all; --more-steps N trains further)\n";
  result_.alreadyComplete = true;
  result_.lastCheckpoint = ckpt_->path;
  return takeResult();
}

void TrainingSession::printRunPlan() {
  const Module &forward = this->forward();
  ModelSummary summary = summarize(forward, batch_);
  out_ << "graphrun train: model " << forward.name() << " (" << summary.nodes << " forward nodes, "
       << compiled_->main().numNodes() << " in the training graph)\n";
  out_ << "  devices    " << llvm::join(executor_->deviceDescriptions(), ", ") << "\n";
  out_ << "  cpu        " << describeCpuIsa() << "\n";
  if (!emulation_.empty())
    out_ << "  emulation  " << emulation_ << "\n";
  if (std::string params = describeParamsChoice(*compiled_, false); !params.empty())
    out_ << "  params     " << params << "\n";
  if (std::string mp = describeModelParallel(*compiled_); !mp.empty())
    out_ << "  strategy   " << mp << "\n";
  if (std::string pipeline = describePipeline(*compiled_); !pipeline.empty())
    out_ << "  strategy   " << pipeline << "\n";
  if (std::string recompute = describeRecompute(*compiled_); !recompute.empty())
    out_ << "  recompute  " << recompute << "\n";
  if (std::string sharded = describeShardedSlots(*compiled_); !sharded.empty())
    out_ << "  sharding   " << sharded << "\n";
  printProcesses();
  out_ << "  batch      " << batch_ << " global";
  if (std::optional<PipelineShape> p = pipelineShape(*compiled_))
    out_ << " over " << p->pipelines << (p->pipelines == 1 ? " pipeline" : " pipelines") << " x "
         << p->microBatches << " micro-batches";
  else if (towersInAll_ > 1)
    out_ << " over " << towersInAll_ << " towers";
  if (std::string split = describeSplit(*compiled_); !split.empty())
    out_ << ", " << split;
  out_ << "; input '" << input_->name() << "' " << toString(input_->result()->type().bound(batch_))
       << "\n";
  printTrainingSetup();
  out_ << "  parameters " << withCommas(summary.params.elements) << " trainable ("
       << humanBytes(summary.params.bytes) << "), " << withCommas(summary.state.elements)
       << " state\n";
  out_ << "  steps      " << totalSteps_ << " in all, from step " << start_ << ", seed " << seed_
       << "\n";
  graphNote_ = executor_->cudaGraphNote();
  if (!graphNote_.empty())
    out_ << "  cuda graph " << graphNote_ << "\n";
  if (executor_->hasGpu())
    out_ << "  gpu layout " << describeGpuLayout(exec_.gpuLayout) << ": "
         << executor_->valuesInLayout(Layout::ChannelsLast) << " values channels-last\n";
  else if (exec_.blockedLayouts)
    out_ << "  cpu layout " << describeCpuLayout(exec_.cpuLayout, cpuHasAmx()) << ": "
         << executor_->valuesInLayout(Layout::Blocked) << " values blocked, "
         << executor_->valuesInLayout(Layout::ChannelsLast) << " channels-last\n";
  if (ckpt_)
    out_ << "  resumed    " << ckpt_->path << " (epoch " << epoch_ << ", " << position_.batches
         << " batches into it)\n";
  for (const std::string &n : notes_)
    out_ << "note: " << n << "\n";
  out_.flush();
}

/// The run plan's workers, tasks and ps tasks.
void TrainingSession::printProcesses() {
  if (plannedWorkers_ > 1) {
    out_ << "  workers    " << plannedWorkers_ << " processes (mpirun), ";
    if (llvm::is_splat(workerTowers_))
      out_ << workerTowers_[0] << " tower" << (workerTowers_[0] == 1 ? "" : "s") << " each";
    else
      out_ << "towers "
           << llvm::join(
                  llvm::map_range(workerTowers_, [](int64_t t) { return std::to_string(t); }),
                  ", ");
    out_ << "; this is rank 0, the chief, with samples " << part_.offset << ".."
         << part_.offset + part_.count - 1 << " of every batch\n";
  }
  if (tasks_) {
    std::vector<std::string> each;
    for (unsigned r = 0; r < tasks_->tasks().size(); ++r) {
      unsigned gpus = tasks_->ofRank(r).gpus;
      each.push_back(tasks_->describe(r) +
                     (gpus ? " (" + std::to_string(gpus) + " GPU" + (gpus == 1 ? ")" : "s)") : ""));
    }
    out_ << "  tasks      " << llvm::join(each, ", ") << "\n";
  }
  if (ps_) {
    out_ << "  ps tasks   " << plannedPs_ << " process" << (plannedPs_ == 1 ? "" : "es") << " (rank"
         << (plannedPs_ == 1 ? " " : "s ") << plannedWorkers_;
    if (plannedPs_ > 1)
      out_ << ".." << plannedWorkers_ + plannedPs_ - 1;
    out_ << ") holding " << llvm::join(llvm::map_range(ps_->taskBytes(), humanBytes), ", ")
         << " of variables "
         << "and optimizer state; "
         << (async_ ? "asynchronous: each worker's update is applied as it arrives (staleness "
                      "reported)"
                    : "synchronous: one update per step, from every worker's gradients")
         << "\n";
  }
}

namespace {

std::string lossDescription(LossKind loss) {
  switch (loss) {
  case LossKind::Nll:
    return "nll: the mean of -output[label] (the output read as log-probabilities)";
  case LossKind::Mse:
    return "mse: the mean of (output - target)^2 over every element";
  default:
    return "cross-entropy: the mean softmax cross-entropy of the logits";
  }
}

} // namespace

/// The run plan's precision, loss scaling, accumulation, data and optimizer.
void TrainingSession::printTrainingSetup() {
  if (Precision p = compiled_->plan().precision.value_or(Precision::FP32); p != Precision::FP32)
    out_ << "  precision  " << modeName(p)
         << " compute (convolutions, batch norms, activations, pooling), f32 master weights, "
            "updates and loss\n";
  else if (opts_.compile.options.precision == Precision::BF16)
    out_ << "  precision  fp32: the model has no convolution, and --precision bf16 covers "
            "convolutions and what follows them\n";
  if (const PlanInfo &p = compiled_->plan(); p.lossScale)
    out_ << llvm::format("  loss scale dynamic, from %.9g: x2 after %lld steps with finite "
                         "gradients, /2 and no update after one without\n",
                         *p.lossScale, (long long)p.lossScaleInterval.value_or(0));
  if (accumulate_ > 1)
    out_ << "  accumulate " << accumulate_ << " micro-batches of " << batch_ << " per update ("
         << accumulate_ * batch_ << " samples, as one batch of " << accumulate_ * batch_
         << "): gradients are summed where they are computed and aggregated once, at the last; "
            "steps, "
            "the learning rate schedule and the metrics count updates\n";
  out_ << "  data       " << opts_.data << " (" << train_->size() << " samples, ";
  const LossKind loss = forward().plan().loss.value_or(LossKind::CrossEntropy);
  if (loss == LossKind::Mse) {
    out_ << "targets " << toString(train_->tensorLayout()->label);
  } else {
    out_ << train_->numClasses();
    if (auto modelClasses = numClasses(forward());
        modelClasses && *modelClasses > train_->numClasses())
      out_ << " of the model's " << *modelClasses;
    out_ << " classes";
  }
  out_ << ", " << perEpoch_ << (accumulate_ > 1 ? " updates" : " steps") << " per epoch)\n";
  out_ << "  loss       " << lossDescription(loss) << "\n";
  const CompileOptions &co = opts_.compile.options;
  auto num = [](double d) { return llvm::format("%g", d); };
  out_ << "  optimizer  " << co.optimizer << ", lr " << num(co.learningRate * lrScale());
  if (lrScale() != 1)
    out_ << " (" << num(co.learningRate) << " x " << replicas()
         << (pipelineShape(*compiled_) ? " pipelines)" : " towers)");
  out_ << " (" << opts_.lrSchedule << ")";
  if (co.optimizer == "momentum")
    out_ << ", momentum " << num(co.momentum) << (co.nesterov ? " nesterov" : "");
  if (co.weightDecay)
    out_ << ", weight decay " << num(co.weightDecay);
  out_ << "\n";
}

llvm::Error TrainingSession::report() {
  if (auto e = reportSteps())
    return e;
  if (auto e = reportInput())
    return e;
  if (opts_.kernelTimes)
    for (const NodeProfile &p : executor_->profile()) {
      auto [seconds, runs] = totals_.afterFirst.lookup(p.node);
      if (p.runs <= runs)
        continue;
      NodeCost cost = nodeCost(*p.node, batch_);
      result_.kernels.push_back({p.node->op(), p.device, cost.flops,
                                 cost.bytesRead + cost.bytesWritten, p.seconds - seconds,
                                 p.runs - runs});
    }
  if (metrics_)
    if (auto e = metrics_->close())
      return e;
  if (tensorboard_)
    if (auto e = tensorboard_->close())
      return e;
  if (auto e = writeProfiles())
    return e;
  if (result_.stoppedBySignal)
    out_ << "stopped by " << signalName(result_.stoppedBySignal) << " after step " << end_ << " of "
         << totalSteps_
         << (opts_.checkpointDir.empty() ? " (no --checkpoint: nothing was saved)"
                                         : "; run the same command with --resume to finish")
         << "\n";
  return llvm::Error::success();
}

/// The result's losses and throughput; the loss scale; where the steps' time
/// went.
llvm::Error TrainingSession::reportSteps() {
  const Totals &t = totals_;
  const int64_t done = t.done;
  result_.steps = done;
  result_.firstLoss = result_.losses.empty() ? 0 : result_.losses.front();
  result_.lastLoss = result_.losses.empty() ? 0 : result_.losses.back();
  result_.stepSeconds = t.trainSeconds;
  result_.inputWaitSeconds = loader_->stats().waitSeconds;
  // The first step includes one-time work (page faults, primitive creation).
  double steady = done > 1 ? t.trainSeconds - t.firstStepSeconds : t.trainSeconds;
  int64_t steadySteps = done > 1 ? done - 1 : done;
  result_.steadySeconds = done > 1 ? steady : 0;
  result_.imagesPerSecond = steady > 0 ? (double)(steadySteps * batch_ * accumulate_) / steady : 0;
  out_ << llvm::format("trained %lld steps", (long long)done);
  if (start_ > 0 || result_.stoppedBySignal)
    out_ << llvm::format(" (steps %lld to %lld of %lld)", (long long)start_ + 1, (long long)end_,
                         (long long)totalSteps_);
  out_ << llvm::format(": loss %.4f -> %.4f, %.1f images/s, %.3f s/step\n", result_.firstLoss,
                       result_.lastLoss, result_.imagesPerSecond,
                       done ? t.trainSeconds / done : 0.0);
  // Whether the capture the run plan announced happened (or why not).
  if (executor_->cudaGraphNote() != graphNote_)
    out_ << "cuda graph: " << executor_->cudaGraphNote() << "\n";
  if (scaling_ && done > 0) {
    auto s = lossScaleState();
    if (!s)
      return withContext(s.takeError(), "after step " + llvm::Twine(end_));
    result_.lossScale = s->first;
    result_.skippedSteps = (int64_t)(s->second - t.skippedBefore);
    out_ << llvm::format("loss scale: %.9g -> %.9g; %lld of %lld steps skipped (gradients not "
                         "finite: no update)\n",
                         t.scaleBefore, result_.lossScale, (long long)result_.skippedSteps,
                         (long long)done);
  }
  if (done > 1) {
    double n = (double)(done - 1);
    const StepTimes &p = t.steadyParts;
    out_ << llvm::format("step time (mean after the first): compute %.3f s, communication inside "
                         "the worker %.3f s, between workers %.3f s, input %.3f s (staging %.3f, "
                         "waiting for the loader %.3f)\n",
                         p.compute / n, p.intraWorker / n, p.interWorker / n,
                         (p.input + t.steadyWait) / n, p.input / n, t.steadyWait / n);
  }
  return llvm::Error::success();
}

/// The input pipeline and the ps tasks: waiting for data, staleness, the
/// samples each rank loaded and those that could not be.
llvm::Error TrainingSession::reportInput() {
  const int64_t done = totals_.done;
  double total = totals_.trainSeconds + result_.inputWaitSeconds;
  if (total > 0 && result_.inputWaitSeconds > 0.1 * total)
    out_ << llvm::format("note: the input pipeline is the bottleneck: %.0f%% of the time went "
                         "to waiting for data (raise --loader-threads)\n",
                         100 * result_.inputWaitSeconds / total);
  if (ps_ && done > 0) {
    if (async_)
      out_ << llvm::format("staleness: the chief's updates %.2f on average, at most %llu "
                           "(updates of other workers applied since it read the variables)\n",
                           (double)totals_.stalenessSum / (double)done,
                           (unsigned long long)totals_.stalenessMax);
    for (size_t p = 0; p < ps_->taskStats().size(); ++p) {
      const PsTaskStats &t = ps_->taskStats()[p];
      out_ << llvm::format("ps task %zu: %llu updates", p, (unsigned long long)t.updates);
      if (async_)
        out_ << llvm::format(", staleness %.2f on average, at most %llu", t.meanStaleness,
                             (unsigned long long)t.maxStaleness);
      out_ << "\n";
    }
  }
  LoaderStats ls = loader_->stats();
  if (plannedWorkers_ > 1 && !async_) {
    auto loaded = workers_.collectives().gather((uint64_t)ls.loaded, "counting the samples each rank loaded");
    if (!loaded)
      return loaded.takeError();
    out_ << "input: samples loaded by each rank "
         << llvm::join(llvm::map_range(*loaded, [](uint64_t n) { return std::to_string(n); }), ", ")
         << " (the global batches held " << ls.batches * batch_ << ")\n";
  }
  if (ls.skipped) {
    out_ << "note: " << ls.skipped << " samples could not be loaded and were skipped"
         << (plannedWorkers_ > 1 ? " (the first this rank met)" : "") << ":\n";
    for (const std::string &m : ls.firstSkipped)
      out_ << "  " << m << "\n";
  }
  return llvm::Error::success();
}

/// The chief's per-op profile, trace and step breakdown.
llvm::Error TrainingSession::writeProfiles() {
  if (!exec_.profile || !workers_.chief())
    return llvm::Error::success();
  if (!opts_.profilePath.empty())
    if (auto e = writeProfile(*executor_, opts_.profilePath))
      return e;
  if (!opts_.tracePath.empty()) {
    if (auto e = executor_->trace().writeChromeTraceFile(opts_.tracePath))
      return e;
    out_ << "trace " << opts_.tracePath << "\n";
  }
  printStepBreakdown(executor_->trace().breakdown(), out_, /*opRows=*/false);
  return llvm::Error::success();
}

} // namespace graphc
