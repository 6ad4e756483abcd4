#include "tools/driver/Trainer.h"

#include "executor/Checkpoint.h"
#include "executor/Device.h"
#include "executor/data/DataLoader.h"
#include "ir/Diagnostics.h"
#include "ir/ModelSummary.h"
#include "tools/driver/Evaluator.h"
#include "tools/driver/Profile.h"
#include "tools/driver/Progress.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

#include <chrono>
#include <cmath>

namespace graphc {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The learning rate at a step of an epoch, from --lr-schedule.
class LrSchedule {
public:
  static llvm::Expected<LrSchedule> parse(llvm::StringRef spec, double base) {
    LrSchedule s;
    s.base_ = base;
    if (spec == "constant" || spec.empty())
      return s;
    if (spec == "cosine") {
      s.kind_ = Cosine;
      return s;
    }
    llvm::SmallVector<llvm::StringRef, 3> parts;
    spec.split(parts, ':');
    if (parts.size() == 3 && parts[0] == "step" && !parts[1].getAsInteger(10, s.every_) &&
        s.every_ > 0 && llvm::to_float(parts[2], s.factor_)) {
      s.kind_ = Step;
      return s;
    }
    return makeError("bad --lr-schedule '" + spec +
                     "': expected constant, cosine or step:EVERY_EPOCHS:FACTOR");
  }
  double at(int64_t step, int64_t totalSteps, int64_t epoch) const {
    switch (kind_) {
    case Constant:
      return base_;
    case Cosine:
      return totalSteps ? base_ * 0.5 * (1 + std::cos(M_PI * (double)step / totalSteps)) : base_;
    case Step:
      return base_ * std::pow(factor_, (double)(epoch / every_));
    }
    return base_;
  }

private:
  enum Kind { Constant, Cosine, Step } kind_ = Constant;
  double base_ = 0, factor_ = 1;
  int64_t every_ = 1;
};

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

/// The logits width of a forward model (its first output).
llvm::Expected<int64_t> numClasses(const Module &forward) {
  const Graph *g = forward.findGraph("main");
  if (!g || g->outputs().empty() || g->outputs()[0]->type().rank() != 2)
    return makeError("model '" + forward.name() +
                     "' must output logits [batch, classes] as its first output");
  return g->outputs()[0]->type().shape[1];
}

llvm::Expected<std::shared_ptr<const Dataset>> openFor(const Module &forward, llvm::StringRef spec,
                                                       Split split, const SyntheticData &synthetic,
                                                       uint64_t seed) {
  auto in = dataInput(forward);
  if (!in)
    return in.takeError();
  auto classes = numClasses(forward);
  if (!classes)
    return classes.takeError();
  const TensorType &t = (*in)->result()->type();
  DatasetOptions o;
  o.split = split;
  o.samples = synthetic.samples;
  o.classes = synthetic.classes > 0 ? std::min(synthetic.classes, *classes) : *classes;
  o.seed = seed;
  if (t.rank() == 4)
    o.shape = {t.shape[1], t.shape[2], t.shape[3]};
  else if (t.rank() == 2)
    o.shape = {1, 1, t.shape[1]};
  else
    return makeError("model input '" + (*in)->name() + "' is " + toString(t) +
                     "; graphrun feeds images [N, C, H, W] or flat samples [N, F]");
  auto ds = openDataset(spec, o);
  if (!ds)
    return ds.takeError();
  if ((*ds)->numClasses() > *classes)
    return makeError("data set '" + spec + "' has " + llvm::Twine((*ds)->numClasses()) +
                     " classes but the model's logits have " + llvm::Twine(*classes) +
                     " (labels would be out of range); pass --num-classes " +
                     llvm::Twine((*ds)->numClasses()) + " to a built-in model");
  return std::shared_ptr<const Dataset>(std::move(*ds));
}

LoaderOptions loaderFor(const Module &forward, const Dataset &ds, int64_t batch, bool train,
                        uint64_t seed, int threads) {
  const TensorType &t = (*dataInput(forward))->result()->type();
  LoaderOptions lo;
  lo.batch = batch;
  lo.shuffle = train;
  lo.dropLast = train;
  lo.seed = seed;
  lo.threads = threads;
  if (t.rank() == 4)
    lo.target = {t.shape[1], t.shape[2], t.shape[3]};
  else
    lo.target = ds.shape(); // a flat input takes the sample as it is
  return lo;
}

/// --emulate: a plan's GPUs run as CPU devices cpu:1.. when this machine has
/// no GPU, or as logical devices folded onto the GPUs it has. Returns the
/// one line the run plan prints about it.
std::string emulateDevices(const Module &placed, ExecutorOptions &exec) {
  std::vector<std::string> gpus;
  for (const Node *n : placed.findGraph("main")->nodes())
    if (llvm::StringRef(n->assignedDevice()).startswith("gpu:") &&
        !llvm::is_contained(gpus, n->assignedDevice()))
      gpus.push_back(n->assignedDevice());
  llvm::sort(gpus);
  int physical = cudaDeviceCount();
  if (gpus.empty())
    return "";
  if (physical > 0) {
    exec.physicalGpu = [physical](const std::string &name) {
      unsigned k = 0;
      llvm::StringRef(name).drop_front(4).getAsInteger(10, k);
      return (int)(k % physical);
    };
    return "the plan's " + std::to_string(gpus.size()) + " GPUs run as logical devices on " +
           std::to_string(physical) + " physical GPU" + (physical > 1 ? "s" : "");
  }
  exec.deviceMap = [](const std::string &d) {
    unsigned k = 0;
    if (llvm::StringRef(d).startswith("gpu:") && !llvm::StringRef(d).drop_front(4).getAsInteger(10, k))
      return "cpu:" + std::to_string(k + 1);
    return d;
  };
  return "no GPU here: the plan's " + std::to_string(gpus.size()) + " GPUs run as CPU devices cpu:1..cpu:" +
         std::to_string(gpus.size()) + " sharing this machine's cores";
}

} // namespace

llvm::Expected<EvalResult> runEvaluation(const Module &forward, llvm::StringRef data,
                                         bool testSplit, int64_t batch,
                                         const ExecutorOptions &exec,
                                         const SyntheticData &synthetic) {
  auto ds = openFor(forward, data, testSplit ? Split::Test : Split::Train, synthetic, exec.seed);
  if (!ds)
    return ds.takeError();
  auto eval = Evaluator::create(forward, batch, exec);
  if (!eval)
    return eval.takeError();
  auto loader = DataLoader::create(*ds, loaderFor(forward, **ds, batch, false, exec.seed, 2));
  if (!loader)
    return loader.takeError();
  return (*eval)->run(**loader);
}

llvm::Expected<TrainResult> runTraining(const TrainOptions &opts, llvm::raw_ostream &out) {
  const int64_t batchOption = opts.compile.options.batch;
  if (batchOption <= 0)
    return makeError("--batch must be positive");
  if (opts.steps < 0 || opts.epochs < 0)
    return makeError("--steps and --epochs must not be negative");
  auto schedule = LrSchedule::parse(opts.lrSchedule, opts.compile.options.learningRate);
  if (!schedule)
    return schedule.takeError();

  // 1. Everything that can be wrong with the inputs, before any step.
  auto loaded = loadModel(opts.model);
  if (!loaded)
    return loaded.takeError();
  // A module `graphc compile` or `graphc place` wrote is already a training
  // step; its forward graph serves evaluation and checkpoints.
  std::unique_ptr<Module> precompiled;
  if (isCompiledForTraining(*loaded->forward)) {
    precompiled = std::move(loaded->forward);
    auto fwd = forwardOf(*precompiled);
    if (!fwd)
      return fwd.takeError();
    loaded->forward = std::move(*fwd);
    if (opts.placement.wanted())
      return makeError("'" + opts.model.path +
                       "' is already compiled; --gpus and --cluster apply to models");
  }
  const Module &forward = *loaded->forward;
  const int64_t batch = precompiled && precompiled->batch() ? *precompiled->batch() : batchOption;
  uint64_t seed = opts.executor.seed;
  auto train = openFor(forward, opts.data, Split::Train, opts.synthetic, seed);
  if (!train)
    return train.takeError();
  if (!opts.checkpointDir.empty())
    if (auto e = checkWritableDir(opts.checkpointDir))
      return e;
  std::unique_ptr<MetricsWriter> metrics;
  if (!opts.metricsPath.empty()) {
    auto m = MetricsWriter::open(opts.metricsPath);
    if (!m)
      return m.takeError();
    metrics = std::move(*m);
  }

  // 2. Compile and bind.
  std::unique_ptr<Module> compiled;
  if (precompiled) {
    compiled = std::move(precompiled);
  } else {
    auto c = opts.placement.wanted() ? compilePlaced(forward, opts.compile, opts.placement)
                                     : compileTraining(forward, opts.compile);
    if (!c)
      return c.takeError();
    compiled = std::move(*c);
  }
  ExecutorOptions exec = opts.executor;
  exec.profile = exec.profile || !opts.tracePath.empty() || !opts.profilePath.empty();
  std::string emulation;
  if (opts.emulate && isPlaced(*compiled))
    emulation = emulateDevices(*compiled, exec);
  auto ex = Executor::create(*compiled, exec);
  if (!ex)
    return ex.takeError();
  Executor &executor = **ex;
  int64_t startEpoch = 0;
  if (opts.resume) {
    if (opts.checkpointDir.empty())
      return makeError("--resume needs --checkpoint DIR");
    auto ckpt = loadCheckpoint(opts.checkpointDir);
    if (!ckpt)
      return ckpt.takeError();
    if (auto e = restoreInto(*ckpt, *compiled, executor))
      return e;
    startEpoch = ckpt->info.epoch;
  }
  auto loader = DataLoader::create(
      *train, loaderFor(forward, **train, batch, true, seed, opts.loaderThreads));
  if (!loader)
    return loader.takeError();
  int64_t perEpoch = (*loader)->batchesPerEpoch();
  if (perEpoch == 0)
    return makeError("data set '" + opts.data + "' has fewer samples (" +
                     llvm::Twine((*train)->size()) + ") than one batch (" + llvm::Twine(batch) +
                     ")");
  int64_t totalSteps = opts.steps ? opts.steps
                       : opts.epochs ? opts.epochs * perEpoch
                                     : 100;
  std::unique_ptr<Evaluator> evaluator;
  std::shared_ptr<const Dataset> test;
  if (opts.evaluate && llvm::StringRef(opts.data).startswith("fashion-mnist")) {
    auto t = openFor(forward, opts.data, Split::Test, opts.synthetic, seed);
    if (!t)
      return t.takeError();
    test = *t;
    ExecutorOptions evalExec = opts.executor;
    evalExec.profile = false;
    evalExec.deviceMap = nullptr;
    auto e = Evaluator::create(forward, opts.evalBatch ? opts.evalBatch : batch, evalExec);
    if (!e)
      return e.takeError();
    evaluator = std::move(*e);
  }

  // 3. The run plan.
  ModelSummary summary = summarize(forward, batch);
  const Node *input = *dataInput(forward);
  int towers = std::max<int>(1, compiled->meta().getInt("towers", 1));
  out << "graphrun train: model " << forward.name() << " (" << summary.nodes
      << " forward nodes, " << compiled->main().numNodes() << " in the training graph)\n";
  out << "  devices    " << llvm::join(executor.deviceDescriptions(), ", ") << "\n";
  if (!emulation.empty())
    out << "  emulation  " << emulation << "\n";
  out << "  batch      " << batch << " global";
  if (towers > 1)
    out << " over " << towers << " towers";
  out << "; input '" << input->name() << "' " << toString(input->result()->type().bound(batch))
      << "\n";
  out << "  data       " << opts.data << " (" << (*train)->size() << " samples, "
      << (*train)->numClasses();
  if (auto modelClasses = numClasses(forward); modelClasses && *modelClasses > (*train)->numClasses())
    out << " of the model's " << *modelClasses;
  out << " classes, " << perEpoch << " steps per epoch)\n";
  const CompileOptions &co = opts.compile.options;
  double lrScale = opts.scaleLrByTowers ? towers : 1;
  auto num = [](double d) { return llvm::format("%g", d); };
  out << "  optimizer  " << co.optimizer << ", lr " << num(co.learningRate * lrScale);
  if (lrScale != 1)
    out << " (" << num(co.learningRate) << " x " << towers << " towers)";
  out << " (" << opts.lrSchedule << ")";
  if (co.optimizer == "momentum")
    out << ", momentum " << num(co.momentum) << (co.nesterov ? " nesterov" : "");
  if (co.weightDecay)
    out << ", weight decay " << num(co.weightDecay);
  out << "\n";
  out << "  parameters " << withCommas(summary.params.elements) << " trainable ("
      << humanBytes(summary.params.bytes) << "), " << withCommas(summary.state.elements)
      << " state\n";
  out << "  steps      " << totalSteps << " from step " << executor.step() << ", seed " << seed
      << "\n";
  out.flush();

  // 4. Train.
  TrainResult result;
  ProgressLine progress(llvm::errs(), totalSteps, opts.progress);
  const TensorType &inputType = input->result()->type().bound(batch);
  int64_t epoch = startEpoch, done = 0;
  double trainSeconds = 0, waitBefore = 0, firstStepSeconds = 0;
  (*loader)->startEpoch(epoch);
  auto evaluateEpoch = [&]() -> llvm::Error {
    if (!evaluator)
      return llvm::Error::success();
    progress.finish();
    if (auto e = evaluator->copyFrom(executor))
      return e;
    auto testLoader =
        DataLoader::create(test, loaderFor(forward, *test, evaluator->batch(), false, seed, 2));
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
      metrics->eval(executor.step(), epoch, r->accuracy(), r->loss, r->samples);
    return llvm::Error::success();
  };
  while (done < totalSteps) {
    auto b = (*loader)->next();
    if (!b)
      return b.takeError();
    if (!*b) {
      if (auto e = evaluateEpoch())
        return e;
      (*loader)->startEpoch(++epoch);
      continue;
    }
    double lr = schedule->at(done, totalSteps, epoch) * lrScale;
    llvm::StringMap<Tensor> feeds;
    feeds[input->name()] = toModelInput((*b)->images, inputType);
    feeds["labels"] = (*b)->labels;
    feeds["lr"] = Tensor::scalar((float)lr);
    auto t0 = Clock::now();
    auto outs = executor.run(feeds);
    if (!outs)
      return withContext(outs.takeError(), "step " + llvm::Twine(executor.step()));
    double dt = seconds(t0, Clock::now());
    double loss = (*outs)[0].at(0);
    if (!std::isfinite(loss))
      return makeError("step " + llvm::Twine(executor.step() - 1) + ": the loss is " +
                       llvm::Twine(std::isnan(loss) ? "NaN" : "infinite") +
                       "; lower the learning rate, or run with --check-numerics to find the "
                       "first node that produced it");
    if (done++ == 0)
      firstStepSeconds = dt;
    trainSeconds += dt;
    double wait = (*loader)->stats().waitSeconds;
    double stepWait = wait - waitBefore;
    waitBefore = wait;
    result.losses.push_back(loss);
    double ips = batch / dt;
    progress.update(done, epoch, loss, ips);
    if (metrics)
      metrics->step({(int64_t)executor.step(), epoch, loss, lr, dt, ips, stepWait});
    if (opts.checkpointEvery && done % opts.checkpointEvery == 0 && done != totalSteps) {
      auto path = saveCheckpointInDir(opts.checkpointDir, forward, executor, *compiled,
                                      {executor.step(), epoch});
      if (!path)
        return path.takeError();
      result.lastCheckpoint = *path;
    }
  }
  progress.finish();
  // An epoch that ended exactly with the last step is evaluated too.
  if (opts.epochs && done == opts.epochs * perEpoch && evaluator)
    if (auto e = evaluateEpoch())
      return e;
  if (!opts.checkpointDir.empty()) {
    auto path = saveCheckpointInDir(opts.checkpointDir, forward, executor, *compiled,
                                    {executor.step(), epoch});
    if (!path)
      return path.takeError();
    result.lastCheckpoint = *path;
    out << "checkpoint " << *path << "\n";
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
  result.imagesPerSecond = steady > 0 ? (double)steadySteps * batch / steady : 0;
  out << llvm::format("trained %lld steps: loss %.4f -> %.4f, %.1f images/s, %.3f s/step\n",
                      (long long)done, result.firstLoss, result.lastLoss, result.imagesPerSecond,
                      done ? trainSeconds / done : 0.0);
  double total = trainSeconds + result.inputWaitSeconds;
  if (total > 0 && result.inputWaitSeconds > 0.1 * total)
    out << llvm::format("note: the input pipeline is the bottleneck: %.0f%% of the time went "
                        "to waiting for data (raise --loader-threads)\n",
                        100 * result.inputWaitSeconds / total);
  LoaderStats ls = (*loader)->stats();
  if (ls.skipped) {
    out << "note: " << ls.skipped << " samples could not be loaded and were skipped:\n";
    for (const std::string &m : ls.firstSkipped)
      out << "  " << m << "\n";
  }
  if (exec.profile) {
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
  return result;
}

} // namespace graphc
