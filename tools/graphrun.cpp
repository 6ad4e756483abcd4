//===- graphrun.cpp - The executor's command line --------------------------===//
//
//   graphrun train  [MODEL | --model NAME] [--data SPEC] [--batch N] [--accumulate K]
//                   [--steps N | --epochs N | --more-steps N] [--optimizer O] [--lr X]
//                   [--checkpoint DIR [--resume]] [--metrics FILE]
//                   [--gpus N] [--workers W | --tasks FILE] ...
//   graphrun eval   --checkpoint CKPT [--data SPEC] [--batch N] [--seed S]
//   graphrun infer  MODEL --input x.npy -o y.npy [--batch-size-from-input]
//   graphrun export --checkpoint CKPT -o model.onnx
//   graphrun calibrate --cluster FILE [--emulate] [-o FILE]
//   graphrun cpu
//
// Every subcommand is a few calls into the libraries (tools/driver); errors
// print one line and exit 1. `train` stopped by SIGINT or SIGTERM writes a
// checkpoint and exits 130 or 143 (tools/driver/Interrupt.h).
//
// GRAPHC_TEST_WRITE_PAUSE_MS (tests only) pauses every crash-safe file write
// half-way, so the crash-safety test can kill a run inside a checkpoint write.
//
//===----------------------------------------------------------------------===//

#include "executor/Workers.h"
#include "frontend/onnx/OnnxExporter.h"
#include "ir/Diagnostics.h"
#include "ir/MemoryLimit.h"
#include "ir/OutputFile.h"
#include "kernels/cpu/CpuIsa.h"
#include "passes/AccumulateGradients.h"
#include "tools/driver/Calibrate.h"
#include "tools/driver/CommandLine.h"
#include "tools/driver/Inference.h"
#include "tools/driver/Interrupt.h"
#include "tools/driver/RunChecks.h"
#include "tools/driver/Trainer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>

using namespace graphc;

namespace {

int fail(llvm::Error e) {
  // One write, so that the lines of several ranks do not interleave.
  llvm::errs() << "graphrun: error: " + llvm::toString(std::move(e)) + "\n";
  return 1;
}

/// --threads: checked, then 0 (every core) when not given.
llvm::Expected<int> threadsFrom(const std::optional<int64_t> &given) {
  if (auto e = checkThreadCount("--threads", given))
    return e;
  return given ? (int)*given : 0;
}

/// The CPU flags of the subcommands that run graphs (train, eval, infer).
struct CpuFlags {
  std::optional<int64_t> threads;
  std::string convAlgorithm = "auto";

  void add(CLI::App *cmd, llvm::StringRef threadsHelp) {
    cmd->add_option("--threads", threads, threadsHelp.str());
    cmd->add_option("--conv-algorithm", convAlgorithm,
                    "auto (Winograd for the 3x3 stride-1 convolutions where it pays, f32 on "
                    "AVX-512) | direct | winograd (wherever the CPU has it)")
        ->capture_default_str();
  }
  /// Checks the flags into `exec`.
  llvm::Error apply(ExecutorOptions &exec) const {
    auto n = threadsFrom(threads);
    if (!n)
      return n.takeError();
    auto algorithm = parseConvAlgorithm(convAlgorithm);
    if (!algorithm)
      return withContext(algorithm.takeError(), "--conv-algorithm");
    exec.threads = *n;
    exec.convAlgorithm = *algorithm;
    return llvm::Error::success();
  }
};

/// --tasks FILE, else TF_CONFIG when --workers does not give the workers;
/// each task without "gpus" gets --gpus.
llvm::Error readTasks(const std::string &file, PlacementRequest &place) {
  const unsigned gpus = (unsigned)std::max(0, place.gpus);
  if (!file.empty()) {
    if (place.workers > 1)
      return makeError("--tasks and --workers both give the workers; use one");
    auto tasks = loadTasksFile(file, gpus);
    if (!tasks)
      return tasks.takeError();
    place.tasks = std::move(*tasks);
    place.tasksSource = "--tasks " + file;
    return llvm::Error::success();
  }
  if (place.workers > 1)
    return llvm::Error::success();
  auto tasks = tasksFromEnvironment(gpus);
  if (!tasks)
    return tasks.takeError();
  if (*tasks) {
    place.tasks = std::move(**tasks);
    place.tasksSource = "TF_CONFIG";
  }
  return llvm::Error::success();
}

void pauseWritesIfTesting() {
  const char *ms = std::getenv("GRAPHC_TEST_WRITE_PAUSE_MS");
  unsigned pause = 0;
  if (ms && !llvm::StringRef(ms).getAsInteger(10, pause))
    setWritePauseForTesting(std::chrono::milliseconds(pause));
}

int run(int argc, char **argv) {
  CLI::App app{"graphrun: train and run graphc models"};
  app.require_subcommand(1);
  // Given before or after the subcommand (fallthrough), for every subcommand.
  app.fallthrough();
  std::optional<std::string> memoryLimit;
  app.add_option("--memory-limit", memoryLimit,
                 "refuse tensors and host allocations beyond SIZE (e.g. 8G) before allocating");

  TrainOptions t;
  t.compile.options.batch = 32;
  CompileOptions &co = t.compile.options;
  bool noProgress = false, noEval = false;
  auto *train = app.add_subcommand("train", "train a model (synthetic data by default)");
  train->add_option("MODEL", t.model.path, "ONNX model, .gir, module file or checkpoint");
  train->add_option("--model", t.model.name,
                    "a built-in model (inception_v3, resnet18, "
                    "resnet50, small_cnn, small_cnn_nobn, mlp)");
  ModelFlags modelFlags;
  train->add_option("--num-classes", modelFlags.numClasses, "classes of a built-in model");
  train->add_option("--image-size", modelFlags.imageSize, "input side of a built-in model");
  train->add_flag("--aux-logits", modelFlags.auxLogits, "inception_v3's auxiliary head");
  train->add_option("--dropout", modelFlags.dropout,
                    "dropout ratio of a built-in model that has dropout (default: its own)");
  train->add_option("--data", t.data, "synthetic | fashion-mnist | fashion-mnist:DIR | images:DIR")
      ->capture_default_str();
  train->add_option("--synthetic-samples", t.synthetic.samples,
                    "size of the synthetic data set (default: 4096)");
  train->add_option("--synthetic-classes", t.synthetic.classes,
                    "synthetic labels use this many of the model's classes (0: all; default: "
                    "10, or all when the model has fewer)");
  train->add_option("--batch", co.batch, "global batch")->capture_default_str();
  std::string accumulate = "1";
  train
      ->add_option("--accumulate", accumulate,
                   "K micro-batches of --batch per update (gradient accumulation: one update "
                   "on K x batch samples; --steps and the lr schedule count updates)")
      ->capture_default_str();
  train->add_option("--steps", t.steps, "the run's steps in all (a resumed run trains the rest)");
  train->add_option("--epochs", t.epochs, "the run's epochs in all (instead of --steps)");
  train->add_option("--more-steps", t.moreSteps, "this many steps past the checkpoint");
  train->add_option("--optimizer", co.optimizer, "sgd | momentum | rmsprop | adam")
      ->capture_default_str();
  train->add_option("--lr", co.learningRate, "learning rate")->capture_default_str();
  train->add_option("--lr-schedule", t.lrSchedule, "constant | cosine | step:EPOCHS:FACTOR")
      ->capture_default_str();
  train->add_option("--momentum", co.momentum, "momentum (momentum, rmsprop)")
      ->capture_default_str();
  train->add_flag("--nesterov", co.nesterov, "Nesterov momentum");
  train->add_option("--weight-decay", co.weightDecay, "L2 weight decay")->capture_default_str();
  train->add_option("--checkpoint", t.checkpointDir, "checkpoint directory");
  train->add_option("--checkpoint-every", t.checkpointEvery,
                    "steps between checkpoints (default: only at the end)");
  train->add_option("--keep-checkpoints", t.keepCheckpoints,
                    "checkpoint files kept in --checkpoint (default 2)");
  train->add_flag("--resume", t.resume,
                  "continue from the newest usable checkpoint in --checkpoint (if any)");
  train->add_option("--metrics", t.metricsPath, "per-step metrics (.jsonl or .csv)");
  train->add_option("--seed", t.executor.seed, "seed: same seed, same devices, same result");
  CpuFlags trainCpu, evalCpu, inferCpu;
  trainCpu.add(train, "CPU threads (default: all cores)");
  train->add_option("--loader-threads", t.loaderThreads, "input pipeline threads")
      ->capture_default_str();
  train->add_flag("--check-numerics", t.executor.checkNumerics,
                  "stop at the first node that produces NaN or infinity");
  train->add_option("--trace", t.tracePath, "Chrome/Perfetto trace of the steps");
  train->add_option("--profile", t.profilePath, "per-op time table");
  train->add_option("--eval-batch", t.evalBatch, "batch for test evaluation");
  train->add_flag("--no-eval", noEval, "skip test evaluation after each epoch");
  train->add_flag("--no-progress", noProgress, "no progress line");
  train->add_option("--dump-dir", t.compile.dump.dumpDir, "IR after every pass, numbered");
  train->add_option("--gpus", t.placement.gpus, "compile for N GPUs, one tower each");
  train->add_option("--cluster", t.placement.clusterFile,
                    "compile for the devices of a cluster file");
  train->add_flag("--emulate", t.emulate,
                  "run the plan's GPUs on CPU devices (or on fewer physical GPUs)");
  TowerModeFlags modes;
  train
      ->add_option(
          "--params", modes.params,
          "where variables live: cpu | gpu:K | spread | mirrored | auto (by predicted step)")
      ->capture_default_str();
  train
      ->add_option(
          "--precision", modes.precision,
          "fp32 | bf16 (convolutions, batch norms, activations in bf16 with f32 master "
          "weights; CPU devices with bf16 instructions) | fp16 (the same in fp16 with dynamic "
          "loss scaling; GPUs, or --emulate)")
      ->capture_default_str();
  train->add_option(
      "--loss-scale", modes.lossScale,
      "dynamic loss scaling from this initial scale, or off (fp16: 65536, others: off)");
  train
      ->add_option("--loss-scale-interval", modes.lossScaleInterval,
                   "finite steps before the loss scale doubles")
      ->capture_default_str();
  train->add_option("--bn", modes.bn, "BatchNorm across towers: local | sync | frozen")
      ->capture_default_str();
  train
      ->add_option("--remainder", modes.remainder,
                   "a batch that does not divide by the towers: error | drop | uneven")
      ->capture_default_str();
  train->add_option("--split", modes.split, "per-device batch weights, e.g. 4,4,2, or auto");
  std::string strategy = "data-parallel";
  train
      ->add_option("--strategy", strategy,
                   "data-parallel | model-parallel (one replica spread over the cluster's devices)")
      ->capture_default_str();
  double bucketMb = 25;
  train->add_option("--bucket-mb", bucketMb, "all-reduce bucket cap in MB (mirrored)")
      ->capture_default_str();
  train->add_flag("--scale-lr", t.scaleLrByTowers, "multiply --lr by the number of towers");
  train
      ->add_option("--workers", t.placement.workers,
                   "worker processes of the run (mpirun -np W), each with --gpus devices")
      ->capture_default_str();
  std::string tasksFile;
  train->add_option("--tasks", tasksFile,
                    "the run's tasks by role (chief, worker, ps) with each one's host and GPUs: "
                    "a cluster file or a TF_CONFIG (read from the environment when not given)");
  train
      ->add_option("--ps", t.placement.ps,
                   "parameter-server tasks holding the variables (mpirun -np W+P; the last P "
                   "ranks; without --workers, the other ranks train)")
      ->capture_default_str();
  train->add_flag("--ps-async", t.placement.psAsync,
                  "ps tasks apply each worker's update as it arrives (no step barrier); the "
                  "chief reports the staleness");
  double collectiveTimeout = 60;
  train
      ->add_option("--collective-timeout", collectiveTimeout,
                   "seconds a collective across workers may wait before every rank stops")
      ->capture_default_str();
  bool plainLayouts = false;
  train->add_flag("--plain-layouts", plainLayouts,
                  "keep every activation row-major (no blocked layouts; for debugging)");

  std::string evalCkpt, evalData = "fashion-mnist";
  int64_t evalBatch = 100;
  ExecutorOptions evalExec;
  bool evalTrainSplit = false;
  SyntheticData evalSynthetic;
  auto *eval = app.add_subcommand("eval", "accuracy of a checkpoint on a data set");
  eval->add_option("--checkpoint", evalCkpt, "checkpoint file or directory")->required();
  eval->add_option("--data", evalData, "data set")->capture_default_str();
  eval->add_option("--batch", evalBatch, "batch")->capture_default_str();
  eval->add_flag("--train-split", evalTrainSplit, "evaluate on the training split");
  evalCpu.add(eval, "CPU threads");
  std::optional<uint64_t> evalSeed;
  eval->add_option("--seed", evalSeed,
                   "seed of the synthetic data (default: the checkpoint's training seed)");
  eval->add_option("--synthetic-samples", evalSynthetic.samples,
                   "size of the synthetic data set (default: 4096)");
  eval->add_option("--synthetic-classes", evalSynthetic.classes,
                   "synthetic labels use this many of the model's classes (0: all; default: "
                   "10, or all when the model has fewer)");

  InferOptions inf;
  auto *infer = app.add_subcommand("infer", "run a model on a NumPy input, write .npy outputs");
  infer->add_option("MODEL", inf.model, "ONNX, .gir, module file or checkpoint")->required();
  infer->add_option("--input", inf.inputs, "input .npy (one per graph input, in order)")
      ->required();
  infer->add_option("-o,--output", inf.output, "output .npy (several outputs: NAME.K.npy)")
      ->required();
  inferCpu.add(infer, "CPU threads");
  infer->add_option("--repeat", inf.repeat, "time this many runs after a warm-up run")
      ->check(CLI::Range(1, 1000000));
  infer->add_flag("--profile", inf.profile, "print where the time went, per op and node");

  std::string exportCkpt, exportOut;
  auto *exp = app.add_subcommand("export", "a checkpoint's trained model as ONNX");
  exp->add_option("--checkpoint", exportCkpt, "checkpoint file or directory")->required();
  exp->add_option("-o,--output", exportOut, "ONNX file")->required();

  auto *cpu = app.add_subcommand(
      "cpu", "the CPU and the instruction sets our code and oneDNN run at (GRAPHC_CPU_ISA caps "
             "both: avx512, avx2 or default)");

  CalibrateRequest cal;
  std::optional<int64_t> calThreads;
  auto *calibrate = app.add_subcommand(
      "calibrate", "measure this machine's devices and links, write them into a cluster file");
  calibrate->add_option("--cluster", cal.clusterFile, "the cluster file to calibrate")->required();
  calibrate->add_flag("--emulate", cal.emulate,
                      "measure the CPU devices that stand for the cluster's GPUs");
  calibrate->add_option("-o,--output", cal.output, "write here instead of over --cluster");
  calibrate->add_option("--threads", calThreads, "CPU threads (default: all cores)");
  calibrate->add_option("--steps", cal.steps, "calibration steps per run")->capture_default_str();
  calibrate->add_option("--model", cal.model, "the calibration workload, a built-in model")
      ->capture_default_str();
  calibrate->add_option("--image-size", cal.imageSize, "its input side")->capture_default_str();
  calibrate->add_option("--per-device", cal.perDevice, "its images per device")
      ->capture_default_str();

  if (auto status = parseCommandLine(app, argc, argv, "graphrun"))
    return *status;
  if (auto e = checkCpuIsaSetting())
    return fail(std::move(e));
  if (*cpu) {
    llvm::outs() << describeCpuIsa() << "\n";
    return 0;
  }
  if (memoryLimit)
    if (auto e = applyMemoryLimitFlag(*memoryLimit))
      return fail(std::move(e));

  pauseWritesIfTesting();
  if (*train) {
    t.progress = !noProgress;
    if (auto e = trainCpu.apply(t.executor))
      return fail(std::move(e));
    if (auto e = applyModelFlags(modelFlags, t.model))
      return fail(std::move(e));
    if (auto e = checkBucketMb(bucketMb))
      return fail(std::move(e));
    co.bucketBytes = (int64_t)(bucketMb * 1e6);
    t.placement.searchBuckets = train->count("--bucket-mb") == 0;
    if (auto e = parseTowerModes(modes, co))
      return fail(std::move(e));
    t.lossScaleGiven = train->count("--loss-scale") > 0;
    auto parsedStrategy = parseStrategy(strategy);
    if (!parsedStrategy)
      return fail(withContext(parsedStrategy.takeError(), "--strategy"));
    t.placement.strategy = *parsedStrategy;
    auto steps = parseAccumulateSteps(accumulate);
    if (!steps)
      return fail(steps.takeError());
    co.accumulate = *steps;
    t.executor.blockedLayouts = !plainLayouts;
    t.evaluate = !noEval;
    co.seed = t.executor.seed;
    t.model.seed = t.executor.seed;
    if (auto e = checkPlacementFlags(t.placement))
      return fail(std::move(e));
    if (auto e = readTasks(tasksFile, t.placement))
      return fail(std::move(e));
    if (!(collectiveTimeout > 0) || !(collectiveTimeout <= 1e6))
      return fail(makeError("--collective-timeout " + numberText(collectiveTimeout) +
                            ": must be a positive number of seconds (at most 1000000)"));
    // Under mpirun: MPI starts here, every rank runs its part of the plan.
    auto workers = Workers::start();
    if (!workers)
      return fail(workers.takeError());
    Workers &w = **workers;
    // With ps tasks and no --workers, the other ranks train.
    if (t.placement.ps > 0 && train->count("--workers") == 0 && !t.placement.tasks &&
        w.size() > (unsigned)t.placement.ps)
      t.placement.workers = (int)w.size() - t.placement.ps;
    w.setTimeout(std::chrono::milliseconds((int64_t)std::ceil(collectiveTimeout * 1000)));
    t.stopRequested = &installStopHandlers();
    w.watchStop(t.stopRequested);
    auto r = runTraining(t, llvm::outs());
    if (!r) {
      if (w.size() > 1)
        fail(makeError(w.whoAmI() + ": " + llvm::toString(r.takeError())));
      else
        fail(r.takeError());
      // Past the start-up rendezvous the other ranks may wait on this one
      // (or this one on a stalled rank): end them all. Before it, every rank
      // meets the same error.
      if (w.size() > 1 && w.rendezvousDone())
        w.abortAll(1);
      w.finish();
      return 1;
    }
    w.finish();
    return r->stoppedBySignal ? 128 + r->stoppedBySignal : 0;
  }
  if (*eval) {
    if (auto e = evalCpu.apply(evalExec))
      return fail(std::move(e));
    if (auto e = checkAtLeast("--batch", evalBatch, 1, "the batch"))
      return fail(std::move(e));
    auto model = loadModel({evalCkpt, "", {}, 0});
    if (!model)
      return fail(model.takeError());
    evalExec.seed = evalSeed.value_or(model->checkpointSeed);
    auto r = runEvaluation(*model->forward, evalData, !evalTrainSplit, evalBatch, evalExec,
                           evalSynthetic);
    if (!r)
      return fail(r.takeError());
    llvm::outs() << llvm::format("%s accuracy %.2f%% (%lld/%lld), loss %.4f\n",
                                 evalTrainSplit ? "train" : "test", 100 * r->accuracy(),
                                 (long long)r->correct, (long long)r->samples, r->loss);
    return 0;
  }
  if (*infer) {
    if (auto e = inferCpu.apply(inf.executor))
      return fail(std::move(e));
    if (auto e = runInference(inf, llvm::outs()))
      return fail(std::move(e));
    return 0;
  }
  if (*calibrate) {
    auto threads = threadsFrom(calThreads);
    if (!threads)
      return fail(threads.takeError());
    cal.threads = *threads;
    if (auto e = checkAtLeast("--image-size", cal.imageSize, 1, "the image side"))
      return fail(std::move(e));
    if (auto e = checkAtLeast("--per-device", cal.perDevice, 1, "the images per device"))
      return fail(std::move(e));
    if (auto e = checkAtLeast("--steps", cal.steps, 2,
                              "the calibration steps (the first is not measured)"))
      return fail(std::move(e));
    if (auto c = calibrateCluster(cal, llvm::outs()); !c)
      return fail(c.takeError());
    return 0;
  }
  if (*exp) {
    auto model = loadModel({exportCkpt, "", {}, 0});
    if (!model)
      return fail(model.takeError());
    if (auto e = exportOnnxFile(*model->forward, exportOut))
      return fail(std::move(e));
    llvm::outs() << "wrote " << exportOut << "\n";
    return 0;
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  ignoreFileSizeSignal();
  return finishOutput(run(argc, argv), "graphrun");
}
