#include "tools/driver/Trainer.h"

#include "executor/Checkpoint.h"
#include "executor/Device.h"
#include "executor/Workers.h"
#include "executor/data/DataLoader.h"
#include "ir/Cost.h"
#include "ir/DeviceId.h"
#include "ir/Diagnostics.h"
#include "ir/ModelSummary.h"
#include "ir/Printer.h"
#include "kernels/cpu/CpuIsa.h"
#include "passes/AccumulateGradients.h"
#include "passes/LossScaling.h"
#include "passes/PsPart.h"
#include "passes/WorkerPart.h"
#include "placement/Cluster.h"
#include "tools/driver/CompileModelParallel.h"
#include "tools/driver/Emulation.h"
#include "tools/driver/Evaluator.h"
#include "tools/driver/Inspect.h"
#include "tools/driver/LrSchedule.h"
#include "tools/driver/ParamsAuto.h"
#include "tools/driver/Profile.h"
#include "tools/driver/Progress.h"
#include "tools/driver/PsTask.h"
#include "tools/driver/RunChecks.h"
#include "tools/driver/TrainingData.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/xxhash.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <map>

namespace graphc {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

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

} // namespace

llvm::Expected<EvalResult> runEvaluation(const Module &forward, llvm::StringRef data,
                                         bool testSplit, int64_t batch, const ExecutorOptions &exec,
                                         const SyntheticData &synthetic) {
  auto ds =
      openDatasetFor(forward, data, testSplit ? Split::Test : Split::Train, synthetic, exec.seed);
  if (!ds)
    return ds.takeError();
  auto eval = Evaluator::create(forward, batch, exec);
  if (!eval)
    return eval.takeError();
  auto loader =
      DataLoader::create(*ds, loaderOptionsFor(forward, **ds, batch, false, exec.seed, 2));
  if (!loader)
    return loader.takeError();
  return (*eval)->run(**loader);
}

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

/// The workers and ps tasks a run's plan asks for against the processes
/// mpirun started.
llvm::Error checkWorldSize(unsigned planned, unsigned ps, const Workers &workers) {
  const unsigned processes = planned + ps;
  if (processes == workers.size())
    return llvm::Error::success();
  std::string plan =
      "the plan is for " + std::to_string(planned) + " worker" + (planned == 1 ? "" : "s");
  if (ps)
    plan += " and " + std::to_string(ps) + " ps task" + (ps == 1 ? "" : "s") + " (" +
            std::to_string(processes) + " processes)";
  if (!workers.usesMpi())
    return makeError(plan +
                     ", but this process was not started by mpirun: run it as "
                     "`mpirun -np " +
                     llvm::Twine(processes) + " graphrun train ...`");
  return makeError(plan + ", but mpirun started " + llvm::Twine(workers.size()) +
                   " processes: pass `mpirun -np " + llvm::Twine(processes) + "`" +
                   (processes == 1 ? " or --workers " + llvm::Twine(workers.size()) : ""));
}

/// The run's plan: the module as loaded when it was compiled already,
/// otherwise the model compiled as the options ask (with several workers and
/// no GPUs, one host tower per worker).
llvm::Expected<std::unique_ptr<Module>> planFor(const TrainOptions &opts, const Module &forward,
                                                std::unique_ptr<Module> precompiled,
                                                unsigned plannedWorkers) {
  if (precompiled)
    return precompiled;
  if (opts.placement.wanted())
    return compilePlaced(forward, opts.compile, opts.placement);
  CompileRequest req = opts.compile;
  if (plannedWorkers > 1)
    req.options.towers = (int)plannedWorkers;
  auto c = compileTraining(forward, req);
  if (!c)
    return c.takeError();
  recordWorkers(**c, opts.placement, std::vector<unsigned>(plannedWorkers, 1));
  if (auto e = addPsTasks(**c, opts.placement))
    return e;
  return c;
}

/// Dynamic loss scaling: the scale and the skipped steps so far.
llvm::Expected<std::pair<double, uint64_t>> lossScaleState(const Executor &executor) {
  auto scale = executor.readVariable(kLossScaleVar);
  if (!scale)
    return scale.takeError();
  auto skipped = executor.readVariable(kSkippedStepsVar);
  if (!skipped)
    return skipped.takeError();
  return std::pair{scale->at(0), (uint64_t)skipped->at(0)};
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

llvm::Expected<TrainResult> runTraining(const TrainOptions &opts, llvm::raw_ostream &chiefOut) {
  if (auto e = checkTrainOptions(opts))
    return e;
  Workers &workers = Workers::current();
  llvm::raw_ostream &out = workers.chief() ? chiefOut : llvm::nulls();
  auto schedule = LrSchedule::parse(opts.lrSchedule, opts.compile.options.learningRate);
  if (!schedule)
    return schedule.takeError();
  auto stopSignal = [&] { return opts.stopRequested ? opts.stopRequested->load() : 0; };

  // 1. Everything that can be wrong with the inputs, before any step.
  auto loaded = loadModel(opts.model);
  if (!loaded)
    return loaded.takeError();
  // A module `graphc compile` or `graphc place` wrote is already a training
  // step; its forward graph serves evaluation and checkpoints.
  std::vector<std::string> notes; // printed with the run plan
  std::unique_ptr<Module> precompiled;
  if (isCompiledForTraining(*loaded->forward)) {
    precompiled = std::move(loaded->forward);
    auto fwd = forwardOf(*precompiled);
    if (!fwd)
      return fwd.takeError();
    loaded->forward = std::move(*fwd);
    const bool fromEnvironment = opts.placement.tasksSource == "TF_CONFIG";
    if (opts.placement.gpus > 0 || !opts.placement.clusterFile.empty() ||
        opts.placement.workers > 1 || (opts.placement.tasks && !fromEnvironment))
      return makeError("'" + opts.model.path +
                       "' is already compiled; --gpus, --cluster, --workers and --tasks apply "
                       "to models");
    if (opts.placement.tasks)
      notes.push_back("TF_CONFIG is not read: the plan '" + opts.model.path +
                      "' records its own workers");
  }
  std::optional<TaskCluster> tasks = opts.placement.tasks;
  if (precompiled) {
    auto recorded = planTasks(*precompiled);
    if (!recorded)
      return recorded.takeError();
    tasks = std::move(*recorded);
  }
  const unsigned plannedWorkers = precompiled ? planWorkers(*precompiled)
                                  : tasks     ? tasks->numWorkers()
                                              : (unsigned)std::max(1, opts.placement.workers);
  const unsigned plannedPs = precompiled ? planPsTasks(*precompiled) : opts.placement.psTasks();
  if (precompiled && (opts.placement.ps > 0 || opts.placement.psAsync))
    return makeError("'" + opts.model.path +
                     "' is already compiled; --ps and --ps-async apply "
                     "to models (the plan records its ps tasks)");
  // Micro-batches per update: the plan's, or --accumulate's.
  unsigned accumulate = opts.compile.options.accumulate;
  if (precompiled) {
    auto k = accumulationSteps(*precompiled);
    if (!k)
      return k.takeError();
    if (accumulate != 1)
      return makeError("'" + opts.model.path +
                       "' is already compiled; --accumulate applies to models (the plan " +
                       (*k > 1 ? "accumulates " + llvm::Twine(*k) + " micro-batches per update"
                               : llvm::Twine("does not accumulate")) +
                       ")");
    accumulate = *k;
  }
  if (precompiled && opts.compile.options.precision != Precision::FP32) {
    std::string planned = precompiled->meta().getString("precision", "fp32");
    if (planned != modeName(opts.compile.options.precision))
      return makeError("'" + opts.model.path + "' is already compiled; --precision applies to " +
                       "models (the plan computes in " + planned + ")");
  }
  if (precompiled && opts.lossScaleGiven &&
      precompiled->meta().getFloat("loss_scale", 0) != opts.compile.options.lossScale) {
    std::string planned = "does not scale its loss";
    if (precompiled->meta().has("loss_scale")) {
      planned.clear();
      llvm::raw_string_ostream(planned)
          << llvm::format("scales from %.9g", precompiled->meta().getFloat("loss_scale"));
    }
    return makeError("'" + opts.model.path + "' is already compiled; --loss-scale applies to " +
                     "models (the plan " + planned + ")");
  }
  if (auto e = checkWorldSize(plannedWorkers, plannedPs, workers))
    return e;
  const bool several = plannedWorkers > 1 || plannedPs > 0;
  // A parameter-server task reads no data: it compiles the plan, compares it
  // with the other ranks' and serves its shard of the variables.
  if (plannedPs > 0 && workers.rank() >= plannedWorkers) {
    std::vector<std::string> ignored;
    std::optional<LoadedCheckpoint> ckpt;
    if (opts.resume) {
      auto found = loadForResume(opts.checkpointDir, ignored);
      if (!found)
        return found.takeError();
      ckpt = std::move(*found);
    }
    auto plan = planFor(opts, *loaded->forward, std::move(precompiled), plannedWorkers);
    if (!plan)
      return plan.takeError();
    if (auto e = workers.agree(planHash(**plan), "plan"))
      return e;
    if (auto e = workers.setPsTasks(plannedPs))
      return e;
    if (auto e = runPsTask(opts, **plan, ckpt, workers))
      return e;
    return TrainResult();
  }
  const Module &forward = *loaded->forward;
  const int64_t batch =
      precompiled && precompiled->batch() ? *precompiled->batch() : opts.compile.options.batch;
  uint64_t seed = opts.executor.seed;
  const std::string dataId = dataIdentity(opts);
  auto train = openDatasetFor(forward, opts.data, Split::Train, opts.synthetic, seed);
  if (!train)
    return train.takeError();
  if (!opts.checkpointDir.empty())
    if (auto e = checkWritableDir(opts.checkpointDir))
      return e;
  std::optional<LoadedCheckpoint> ckpt;
  if (opts.resume) {
    auto found = loadForResume(opts.checkpointDir, notes);
    if (!found)
      return found.takeError();
    ckpt = std::move(*found);
    if (!ckpt)
      notes.push_back("no checkpoint in '" + opts.checkpointDir + "' yet: starting from step 0");
  }
  const unsigned keep = opts.keepCheckpoints.value_or(kDefaultKeepCheckpoints);
  // Checks the data against the batch now; a rank of several workers loads
  // only its part of every batch, with a loader made once its part is known.
  LoaderOptions loading =
      loaderOptionsFor(forward, **train, batch, true, seed, (int)opts.loaderThreads);
  auto loader = DataLoader::create(*train, loading);
  if (!loader)
    return loader.takeError();
  // Batches of the loader are micro-batches; a step is an update of
  // `accumulate` of them, all from one epoch.
  const int64_t microPerEpoch = (*loader)->batchesPerEpoch();
  const int64_t perEpoch = microPerEpoch / accumulate;
  if (perEpoch == 0)
    return makeError("data set '" + opts.data + "' has fewer samples (" +
                     llvm::Twine((*train)->size()) + ") than one " +
                     (accumulate > 1
                          ? "update (" + llvm::Twine(accumulate) + " x " + llvm::Twine(batch) + ")"
                          : "batch (" + llvm::Twine(batch) + ")"));

  // The plan: --steps and --epochs are the run's total.
  const int64_t start = ckpt ? (int64_t)ckpt->info.step : 0;
  const int64_t totalSteps = opts.moreSteps ? start + *opts.moreSteps
                             : opts.steps   ? *opts.steps
                             : opts.epochs  ? *opts.epochs * perEpoch
                                            : kDefaultSteps;
  TrainResult result;
  if (start >= totalSteps) {
    for (const std::string &n : notes)
      out << "note: " << n << "\n";
    out << "graphrun train: nothing to train: checkpoint '" << ckpt->path << "' is at step "
        << start << (start == totalSteps ? ", the run's last" : ", past the run's")
        << " (the run is " << totalSteps << " steps in all; --more-steps N trains further)\n";
    result.alreadyComplete = true;
    result.lastCheckpoint = ckpt->path;
    return result;
  }
  std::unique_ptr<MetricsWriter> metrics;
  if (!opts.metricsPath.empty() && workers.chief()) {
    auto m = MetricsWriter::open(opts.metricsPath, /*append=*/ckpt.has_value());
    if (!m)
      return m.takeError();
    metrics = std::move(*m);
  }

  // 2. Compile and bind.
  auto plan = planFor(opts, forward, std::move(precompiled), plannedWorkers);
  if (!plan)
    return plan.takeError();
  std::unique_ptr<Module> compiled = std::move(*plan);
  // Several processes: the same plan everywhere, then this rank's part of it.
  WorkerSlice part{0, batch};
  std::unique_ptr<PsWorker> ps;
  // The plan's towers, in all and per worker (the rank keeps only its own).
  const int towersInAll = std::max<int>(1, compiled->meta().getInt("towers", 1));
  Ints workerTowers = compiled->meta().getInts("worker_towers");
  if (workerTowers.empty())
    workerTowers.assign(plannedWorkers, towersInAll / plannedWorkers);
  if (several) {
    if (auto e = workers.agree(planHash(*compiled), "plan"))
      return e;
    if (auto e = workers.setPsTasks(plannedPs))
      return e;
    if (ckpt && plannedPs)
      if (auto e = checkFits(*ckpt, *compiled))
        return e;
  }
  const bool async = plannedPs > 0 && planPsAsync(*compiled);
  if (plannedWorkers > 1) {
    auto s = workerSlice(*compiled, workers.rank());
    if (!s)
      return s.takeError();
    part = *s;
    if (auto e = selectWorkerPart(*compiled, workers.rank()))
      return e;
    // Asynchronous workers share no step: each keeps to its own rows, and a
    // sample that fails to load moves only its own part.
    auto orFlags = [&workers, async](llvm::MutableArrayRef<uint8_t> f) -> llvm::Error {
      if (async)
        return llvm::Error::success();
      return workers.orFlags(f, "agreeing which samples failed to load");
    };
    loading.part = LoaderPart{part.offset, part.count, orFlags};
    auto l = DataLoader::create(*train, loading);
    if (!l)
      return l.takeError();
    loader = std::move(l);
  }
  if (plannedPs > 0) {
    auto w = PsWorker::create(*compiled, workers);
    if (!w)
      return w.takeError();
    ps = std::move(*w);
  }
  if (auto e = checkPlanFitsCluster(*compiled))
    return e;
  ExecutorOptions exec = opts.executor;
  if (accumulate > 1)
    exec.graphs = {kMicroGraph.str()};
  if (plannedWorkers > 1) {
    exec.acrossWorkers = &workers;
    exec.gpuAcrossWorkers = &workers;
  }
  exec.profile =
      exec.profile || !opts.tracePath.empty() || !opts.profilePath.empty() || opts.kernelTimes;
  std::string emulation;
  if (opts.emulate && isPlaced(*compiled)) {
    auto line = emulateDevices(*compiled, exec);
    if (!line)
      return line.takeError();
    emulation = std::move(*line);
  }
  if (auto e = checkPrecisionRuns(*compiled, exec.deviceMap))
    return e;
  if (std::string n = precisionNote(*compiled); !n.empty())
    notes.push_back(std::move(n));
  auto ex = Executor::create(*compiled, exec);
  if (!ex)
    return ex.takeError();
  Executor &executor = **ex;
  if (!executor.algorithmNote().empty())
    notes.push_back(executor.algorithmNote());
  int64_t epoch = 0;
  LoaderPosition position;
  if (ckpt) {
    if (auto e = ps ? restorePartInto(*ckpt, executor) : restoreInto(*ckpt, *compiled, executor))
      return e;
    result.lastCheckpoint = ckpt->path;
    const CheckpointInfo &i = ckpt->info;
    epoch = i.epoch;
    if (i.seed == seed && i.batch == batch && i.data == dataId &&
        i.epochSamples <= (*train)->size())
      position = {i.epochBatches, i.epochSamples};
    else
      notes.push_back("the checkpoint's run had seed " + std::to_string(i.seed) + ", batch " +
                      std::to_string(i.batch) + " and data " + i.data + "; this one has seed " +
                      std::to_string(seed) + ", batch " + std::to_string(batch) + " and data " +
                      dataId + ": epoch " + std::to_string(epoch) +
                      " starts afresh, and the result will differ from an uninterrupted run");
  }
  std::unique_ptr<Evaluator> evaluator;
  std::shared_ptr<const Dataset> test;
  if (opts.evaluate && llvm::StringRef(opts.data).startswith("fashion-mnist") && workers.chief()) {
    auto t = openDatasetFor(forward, opts.data, Split::Test, opts.synthetic, seed);
    if (!t)
      return t.takeError();
    test = *t;
    ExecutorOptions evalExec = opts.executor;
    evalExec.profile = false;
    evalExec.deviceMap = nullptr;
    auto e = Evaluator::create(forward, opts.evalBatch.value_or(batch), evalExec);
    if (!e)
      return e.takeError();
    evaluator = std::move(*e);
  }

  // 3. The run plan.
  ModelSummary summary = summarize(forward, batch);
  const Node *input = *dataInput(forward);
  out << "graphrun train: model " << forward.name() << " (" << summary.nodes << " forward nodes, "
      << compiled->main().numNodes() << " in the training graph)\n";
  out << "  devices    " << llvm::join(executor.deviceDescriptions(), ", ") << "\n";
  out << "  cpu        " << describeCpuIsa() << "\n";
  if (!emulation.empty())
    out << "  emulation  " << emulation << "\n";
  if (std::string params = describeParamsChoice(*compiled, false); !params.empty())
    out << "  params     " << params << "\n";
  if (std::string mp = describeModelParallel(*compiled); !mp.empty())
    out << "  strategy   " << mp << "\n";
  if (plannedWorkers > 1) {
    out << "  workers    " << plannedWorkers << " processes (mpirun), ";
    if (llvm::is_splat(workerTowers))
      out << workerTowers[0] << " tower" << (workerTowers[0] == 1 ? "" : "s") << " each";
    else
      out << "towers "
          << llvm::join(llvm::map_range(workerTowers, [](int64_t t) { return std::to_string(t); }),
                        ", ");
    out << "; this is rank 0, the chief, with samples " << part.offset << ".."
        << part.offset + part.count - 1 << " of every batch\n";
  }
  if (tasks) {
    std::vector<std::string> each;
    for (unsigned r = 0; r < tasks->tasks().size(); ++r) {
      unsigned gpus = tasks->ofRank(r).gpus;
      each.push_back(tasks->describe(r) +
                     (gpus ? " (" + std::to_string(gpus) + " GPU" + (gpus == 1 ? ")" : "s)") : ""));
    }
    out << "  tasks      " << llvm::join(each, ", ") << "\n";
  }
  if (ps) {
    out << "  ps tasks   " << plannedPs << " process" << (plannedPs == 1 ? "" : "es") << " (rank"
        << (plannedPs == 1 ? " " : "s ") << plannedWorkers;
    if (plannedPs > 1)
      out << ".." << plannedWorkers + plannedPs - 1;
    out << ") holding " << llvm::join(llvm::map_range(ps->taskBytes(), humanBytes), ", ")
        << " of variables "
        << "and optimizer state; "
        << (async ? "asynchronous: each worker's update is applied as it arrives (staleness "
                    "reported)"
                  : "synchronous: one update per step, from every worker's gradients")
        << "\n";
  }
  out << "  batch      " << batch << " global";
  if (towersInAll > 1)
    out << " over " << towersInAll << " towers";
  if (std::string split = describeSplit(*compiled); !split.empty())
    out << ", " << split;
  out << "; input '" << input->name() << "' " << toString(input->result()->type().bound(batch))
      << "\n";
  if (std::string p = compiled->meta().getString("precision"); p == "bf16" || p == "fp16")
    out << "  precision  " << p
        << " compute (convolutions, batch norms, activations, pooling), f32 master weights, "
           "updates and loss\n";
  else if (opts.compile.options.precision == Precision::BF16)
    out << "  precision  fp32: the model has no convolution, and --precision bf16 covers "
           "convolutions and what follows them\n";
  if (compiled->meta().has("loss_scale"))
    out << llvm::format("  loss scale dynamic, from %.9g: x2 after %lld steps with finite "
                        "gradients, /2 and no update after one without\n",
                        compiled->meta().getFloat("loss_scale"),
                        (long long)compiled->meta().getInt("loss_scale_interval"));
  if (accumulate > 1)
    out << "  accumulate " << accumulate << " micro-batches of " << batch << " per update ("
        << accumulate * batch << " samples, as one batch of " << accumulate * batch
        << "): gradients are summed where they are computed and aggregated once, at the last; "
           "steps, "
           "the learning rate schedule and the metrics count updates\n";
  out << "  data       " << opts.data << " (" << (*train)->size() << " samples, "
      << (*train)->numClasses();
  if (auto modelClasses = numClasses(forward);
      modelClasses && *modelClasses > (*train)->numClasses())
    out << " of the model's " << *modelClasses;
  out << " classes, " << perEpoch << (accumulate > 1 ? " updates" : " steps") << " per epoch)\n";
  const CompileOptions &co = opts.compile.options;
  double lrScale = opts.scaleLrByTowers ? towersInAll : 1;
  auto num = [](double d) { return llvm::format("%g", d); };
  out << "  optimizer  " << co.optimizer << ", lr " << num(co.learningRate * lrScale);
  if (lrScale != 1)
    out << " (" << num(co.learningRate) << " x " << towersInAll << " towers)";
  out << " (" << opts.lrSchedule << ")";
  if (co.optimizer == "momentum")
    out << ", momentum " << num(co.momentum) << (co.nesterov ? " nesterov" : "");
  if (co.weightDecay)
    out << ", weight decay " << num(co.weightDecay);
  out << "\n";
  out << "  parameters " << withCommas(summary.params.elements) << " trainable ("
      << humanBytes(summary.params.bytes) << "), " << withCommas(summary.state.elements)
      << " state\n";
  out << "  steps      " << totalSteps << " in all, from step " << start << ", seed " << seed
      << "\n";
  if (ckpt)
    out << "  resumed    " << ckpt->path << " (epoch " << epoch << ", " << position.batches
        << " batches into it)\n";
  for (const std::string &n : notes)
    out << "note: " << n << "\n";
  out.flush();

  // 4. Train.
  ProgressLine progress(llvm::errs(), totalSteps, opts.progress && workers.chief(), start);
  const TensorType &inputType = input->result()->type().bound(part.count);
  int64_t done = 0;
  double trainSeconds = 0, waitBefore = 0, firstStepSeconds = 0;
  const bool scaling = compiled->meta().has("loss_scale");
  double scaleBefore = 0;
  uint64_t skippedBefore = 0;
  if (scaling) {
    auto s = lossScaleState(executor);
    if (!s)
      return s.takeError();
    std::tie(scaleBefore, skippedBefore) = *s;
  }
  uint64_t lastSaved = ckpt ? ckpt->info.step : UINT64_MAX;
  (*loader)->startEpoch(epoch, position);
  auto checkpoint = [&]() -> llvm::Error {
    if (!workers.chief())
      return llvm::Error::success();
    LoaderPosition at = (*loader)->position();
    CheckpointInfo info{executor.step(), epoch, at.batches, at.samples, seed, batch, dataId};
    llvm::Expected<std::string> path = std::string();
    if (ps) {
      // The variables and slots live in the ps tasks.
      auto tensors = ps->checkpointTensors(executor);
      if (!tensors)
        return tensors.takeError();
      path = saveCheckpointInDir(opts.checkpointDir, forward, *tensors, ps->checkpointLayout(),
                                 info, keep);
    } else {
      path = saveCheckpointInDir(opts.checkpointDir, forward, executor, *compiled, info, keep);
    }
    if (!path)
      return path.takeError();
    result.lastCheckpoint = *path;
    lastSaved = executor.step();
    return llvm::Error::success();
  };
  auto evaluateEpoch = [&]() -> llvm::Error {
    if (!evaluator)
      return llvm::Error::success();
    progress.finish();
    if (auto e = evaluator->copyFrom(executor))
      return e;
    auto testLoader = DataLoader::create(
        test, loaderOptionsFor(forward, *test, evaluator->batch(), false, seed, 2));
    if (!testLoader)
      return testLoader.takeError();
    auto r = evaluator->run(**testLoader);
    if (!r)
      return r.takeError();
    out << llvm::format("epoch %lld: test accuracy %.2f%% (%lld/%lld), test loss %.4f\n",
                        (long long)epoch, 100 * r->accuracy(), (long long)r->correct,
                        (long long)r->samples, r->loss);
    out.flush();
    result.epochs.push_back({epoch, r->accuracy(), r->loss});
    if (metrics)
      return metrics->eval(executor.step(), epoch, r->accuracy(), r->loss, r->samples);
    return llvm::Error::success();
  };
  // Every rank stops after the same step, when any of them is signalled (one
  // process alone may stop before its first).
  bool stopping = plannedWorkers == 1 && stopSignal() != 0;
  uint64_t stalenessSum = 0, stalenessMax = 0;
  // Summed over the steps after the first (which holds one-time work).
  StepTimes steadyParts;
  double steadyWait = 0;
  // --kernelTimes: each node's profile after the first step, subtracted at the end.
  llvm::DenseMap<const Node *, std::pair<double, int64_t>> afterFirst;
  while ((int64_t)executor.step() < totalSteps && !stopping) {
    if (several)
      workers.setStep(executor.step());
    // 0-based here; messages, progress and metrics count steps from 1.
    const int64_t step = executor.step();
    // An update's micro-batches come from one epoch: an epoch whose rest
    // holds fewer ends here, as a short last batch does.
    if (accumulate > 1 && microPerEpoch - (*loader)->position().batches < accumulate) {
      if (auto e = evaluateEpoch())
        return e;
      (*loader)->startEpoch(++epoch);
    }
    // The update: micro-steps, then main with the last micro-batch. An
    // epoch that ends early (samples that failed to load) lets the update
    // go on in the next.
    double lr = 0, runSeconds = 0;
    StepTimes parts;
    std::optional<std::vector<Tensor>> outs;
    for (unsigned k = 0; k < accumulate;) {
      auto b = (*loader)->next();
      if (!b)
        return withContext(b.takeError(), "step " + llvm::Twine(step + 1));
      if (!*b) {
        if (auto e = evaluateEpoch())
          return e;
        (*loader)->startEpoch(++epoch);
        continue;
      }
      const bool last = ++k == accumulate;
      llvm::StringMap<Tensor> feeds;
      feeds[input->name()] = toModelInput((*b)->images, inputType);
      feeds["labels"] = (*b)->labels;
      if (last) {
        lr = schedule->at(step, totalSteps, epoch) * lrScale;
        feeds["lr"] = Tensor::scalar((float)lr);
      }
      auto start = Clock::now();
      auto ran = last ? executor.run(feeds) : executor.run(kMicroGraph, feeds);
      if (!ran) {
        std::string where = "step ";
        where += std::to_string(step + 1);
        if (accumulate > 1)
          where += ", micro-batch " + llvm::Twine(k).str() + " of " + llvm::Twine(accumulate).str();
        return withContext(ran.takeError(), where);
      }
      runSeconds += seconds(start, Clock::now());
      parts += executor.lastStepTimes();
      if (last)
        outs = std::move(*ran);
    }
    if (opts.kernelTimes && afterFirst.empty())
      for (const NodeProfile &p : executor.profile())
        afterFirst[p.node] = {p.seconds, p.runs};
    // Parameter-server tasks: the gradients go to them, the variables of
    // the next step come back.
    std::optional<uint64_t> staleness;
    auto t1 = Clock::now();
    if (ps) {
      auto s = ps->exchange(step, lr, *outs, executor);
      if (!s)
        return withContext(s.takeError(), "step " + llvm::Twine(step + 1));
      staleness = *s;
      stalenessSum += *s;
      stalenessMax = std::max(stalenessMax, *s);
    }
    // Every rank stops after the same step (asynchronous workers share no
    // step: each stops on its own signal). The agreement is part of the step.
    bool stop = stopSignal() != 0;
    if (!async) {
      auto any = workers.any(stop, "agreeing whether to stop");
      if (!any)
        return withContext(any.takeError(), "step " + llvm::Twine(step + 1));
      stop = *any;
    }
    auto t2 = Clock::now();
    double dt = runSeconds + seconds(t1, t2);
    // The exchange and the agreement are between workers; the rest of the
    // step outside run() (reading its outputs) is compute.
    if (ps || plannedWorkers > 1)
      parts.interWorker += seconds(t1, t2);
    parts.compute = std::max(0.0, dt - parts.input - parts.intraWorker - parts.interWorker);
    double loss = (*outs)[0].at(0);
    // Asynchronous workers do not sum their losses: this one's part, as a
    // mean over its own samples.
    if (async)
      loss *= (double)batch / (double)part.count;
    if (!std::isfinite(loss))
      return makeError("step " + llvm::Twine(step + 1) + ": the loss is " +
                       llvm::Twine(std::isnan(loss) ? "NaN" : "infinite") +
                       "; lower the learning rate, or run with --check-numerics to find the "
                       "first node that produced it");
    double wait = (*loader)->stats().waitSeconds;
    double stepWait = wait - waitBefore;
    waitBefore = wait;
    if (done++ == 0) {
      firstStepSeconds = dt;
    } else {
      steadyParts += parts;
      steadyWait += stepWait;
    }
    trainSeconds += dt;
    result.losses.push_back(loss);
    // The scale's state per step only for the metrics: reading it waits for
    // the device, which the summary needs once, after the run.
    std::optional<double> scale;
    std::optional<uint64_t> skipped;
    if (scaling && metrics) {
      auto s = lossScaleState(executor);
      if (!s)
        return withContext(s.takeError(), "step " + llvm::Twine(step + 1));
      scale = s->first;
      skipped = s->second;
    }
    double ips = (double)(batch * accumulate) / dt;
    progress.update(step + 1, epoch, loss, ips, async ? staleness : std::nullopt);
    if (metrics)
      if (auto e = metrics->step({step + 1, epoch, loss, lr, dt, ips, stepWait, parts,
                                  async ? staleness : std::nullopt, scale, skipped}))
        return e;
    if (opts.checkpointEvery && (step + 1) % *opts.checkpointEvery == 0 && step + 1 != totalSteps)
      if (auto e = checkpoint())
        return e;
    stopping = stop;
  }
  progress.finish();
  const int64_t end = executor.step();
  // The chief waits for every worker to finish and takes the final
  // variables, for evaluation and the last checkpoint.
  if (ps)
    if (auto e = ps->finish(executor))
      return withContext(std::move(e), "after step " + llvm::Twine(end));
  result.stoppedBySignal = end < totalSteps ? (stopSignal() ? stopSignal() : SIGTERM) : 0;
  // An epoch that ended exactly with the last step is evaluated too.
  if (opts.epochs && end == totalSteps && done > 0)
    if (auto e = evaluateEpoch())
      return e;
  if (!opts.checkpointDir.empty() && workers.chief()) {
    if ((uint64_t)end != lastSaved)
      if (auto e = checkpoint())
        return e;
    out << "checkpoint " << result.lastCheckpoint << "\n";
  }

  // 5. Summary.
  result.steps = done;
  result.firstLoss = result.losses.empty() ? 0 : result.losses.front();
  result.lastLoss = result.losses.empty() ? 0 : result.losses.back();
  result.stepSeconds = trainSeconds;
  result.inputWaitSeconds = (*loader)->stats().waitSeconds;
  // The first step includes one-time work (page faults, primitive creation).
  double steady = done > 1 ? trainSeconds - firstStepSeconds : trainSeconds;
  int64_t steadySteps = done > 1 ? done - 1 : done;
  result.steadySeconds = done > 1 ? steady : 0;
  result.imagesPerSecond = steady > 0 ? (double)(steadySteps * batch * accumulate) / steady : 0;
  out << llvm::format("trained %lld steps", (long long)done);
  if (start > 0 || result.stoppedBySignal)
    out << llvm::format(" (steps %lld to %lld of %lld)", (long long)start + 1, (long long)end,
                        (long long)totalSteps);
  out << llvm::format(": loss %.4f -> %.4f, %.1f images/s, %.3f s/step\n", result.firstLoss,
                      result.lastLoss, result.imagesPerSecond, done ? trainSeconds / done : 0.0);
  if (scaling && done > 0) {
    auto s = lossScaleState(executor);
    if (!s)
      return withContext(s.takeError(), "after step " + llvm::Twine(end));
    result.lossScale = s->first;
    result.skippedSteps = (int64_t)(s->second - skippedBefore);
    out << llvm::format("loss scale: %.9g -> %.9g; %lld of %lld steps skipped (gradients not "
                        "finite: no update)\n",
                        scaleBefore, result.lossScale, (long long)result.skippedSteps,
                        (long long)done);
  }
  if (done > 1) {
    double n = (double)(done - 1);
    out << llvm::format("step time (mean after the first): compute %.3f s, communication inside "
                        "the worker %.3f s, between workers %.3f s, input %.3f s (staging %.3f, "
                        "waiting for the loader %.3f)\n",
                        steadyParts.compute / n, steadyParts.intraWorker / n,
                        steadyParts.interWorker / n, (steadyParts.input + steadyWait) / n,
                        steadyParts.input / n, steadyWait / n);
  }
  double total = trainSeconds + result.inputWaitSeconds;
  if (total > 0 && result.inputWaitSeconds > 0.1 * total)
    out << llvm::format("note: the input pipeline is the bottleneck: %.0f%% of the time went "
                        "to waiting for data (raise --loader-threads)\n",
                        100 * result.inputWaitSeconds / total);
  if (ps && done > 0) {
    if (async)
      out << llvm::format("staleness: the chief's updates %.2f on average, at most %llu (updates "
                          "of other workers applied since it read the variables)\n",
                          (double)stalenessSum / (double)done, (unsigned long long)stalenessMax);
    for (size_t p = 0; p < ps->taskStats().size(); ++p) {
      const PsTaskStats &t = ps->taskStats()[p];
      out << llvm::format("ps task %zu: %llu updates", p, (unsigned long long)t.updates);
      if (async)
        out << llvm::format(", staleness %.2f on average, at most %llu", t.meanStaleness,
                            (unsigned long long)t.maxStaleness);
      out << "\n";
    }
  }
  LoaderStats ls = (*loader)->stats();
  if (plannedWorkers > 1 && !async) {
    auto loaded = workers.gather((uint64_t)ls.loaded, "counting the samples each rank loaded");
    if (!loaded)
      return loaded.takeError();
    out << "input: samples loaded by each rank "
        << llvm::join(llvm::map_range(*loaded, [](uint64_t n) { return std::to_string(n); }), ", ")
        << " (the global batches held " << ls.batches * batch << ")\n";
  }
  if (ls.skipped) {
    out << "note: " << ls.skipped << " samples could not be loaded and were skipped"
        << (plannedWorkers > 1 ? " (the first this rank met)" : "") << ":\n";
    for (const std::string &m : ls.firstSkipped)
      out << "  " << m << "\n";
  }
  if (opts.kernelTimes)
    for (const NodeProfile &p : executor.profile()) {
      auto [seconds, runs] = afterFirst.lookup(p.node);
      if (p.runs <= runs)
        continue;
      NodeCost cost = nodeCost(*p.node, batch);
      result.kernels.push_back({p.node->op(), p.device, cost.flops,
                                cost.bytesRead + cost.bytesWritten, p.seconds - seconds,
                                p.runs - runs});
    }
  if (metrics)
    if (auto e = metrics->close())
      return e;
  if (exec.profile && workers.chief()) {
    if (!opts.profilePath.empty())
      if (auto e = writeProfile(executor, opts.profilePath))
        return e;
    if (!opts.tracePath.empty()) {
      if (auto e = executor.trace().writeChromeTraceFile(opts.tracePath))
        return e;
      out << "trace " << opts.tracePath << "\n";
    }
    printTimeBreakdown(executor.trace(), out);
  }
  if (result.stoppedBySignal)
    out << "stopped by " << signalName(result.stoppedBySignal) << " after step " << end << " of "
        << totalSteps
        << (opts.checkpointDir.empty() ? " (no --checkpoint: nothing was saved)"
                                       : "; run the same command with --resume to finish")
        << "\n";
  return result;
}

} // namespace graphc
