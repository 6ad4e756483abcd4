//===- graphrun.cpp - The executor's command line --------------------------===//
//
//   graphrun train  [MODEL | --model NAME] [--data SPEC] [--batch N] [--accumulate K]
//                   [--steps N | --epochs N | --more-steps N] [--optimizer O] [--lr X]
//                   [--checkpoint DIR [--resume]] [--metrics FILE]
//                   [--gpus N] [--workers W | --tasks FILE] ...
//   graphrun launch --hostfile HOSTS --elastic MIN:MAX [--mpirun PROGRAM] -- TRAIN-FLAGS...
//   graphrun eval   --checkpoint CKPT [--data SPEC] [--batch N] [--seed S]
//   graphrun infer  MODEL --input x.npy -o y.npy [--batch-size-from-input]
//   graphrun export --checkpoint CKPT -o model.onnx
//   graphrun calibrate --cluster FILE [--emulate] [--gpu-model NAME] [-o FILE]
//   graphrun cpu
//
// Every subcommand is a struct: add() declares its flags (the ones graphc
// shares come from tools/driver/FlagGroups.h), run() makes a few calls into
// the libraries (tools/driver); errors print one line and exit 1. `train`
// stopped by SIGINT or SIGTERM writes a checkpoint and exits 130 or 143
// (tools/driver/Interrupt.h).
//
// GRAPHC_TEST_WRITE_PAUSE_MS (tests only) pauses every crash-safe file write
// half-way, so the crash-safety test can kill a run inside a checkpoint write.
//
//===----------------------------------------------------------------------===//

#include "executor/dist/StartWorkers.h"
#include "frontend/onnx/OnnxExporter.h"
#include "ir/Diagnostics.h"
#include "ir/OutputFile.h"
#include "kernels/cpu/CpuIsa.h"
#include "tools/driver/Calibrate.h"
#include "tools/driver/CommandLine.h"
#include "tools/driver/ElasticLaunch.h"
#include "tools/driver/FlagGroups.h"
#include "tools/driver/Inference.h"
#include "tools/driver/Interrupt.h"
#include "tools/driver/RunChecks.h"
#include "tools/driver/Trainer.h"
#include "tools/driver/TrainingData.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
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

void pauseWritesIfTesting() {
  const char *ms = std::getenv("GRAPHC_TEST_WRITE_PAUSE_MS");
  unsigned pause = 0;
  if (ms && !llvm::StringRef(ms).getAsInteger(10, pause))
    setWritePauseForTesting(std::chrono::milliseconds(pause));
}

struct TrainCommand {
  TrainOptions t;
  ModelSourceFlags model;
  PlacementFlags placementFlags;
  TaskFlags taskFlags;
  CpuFlags cpu;
  GpuLayoutFlag gpuLayout;
  bool noProgress = false, noEval = false, plainLayouts = false;
  std::string cudaGraphs = "auto";
  double collectiveTimeout = 60;
  CLI::App *cmd = nullptr;
  CLI::Option *batchOption = nullptr;

  void add(CLI::App &app) {
    t.compile.options.batch = kDefaultBatch;
    cmd = app.add_subcommand("train", "train a model (synthetic data by default)");
    model.add(cmd, /*dropout=*/true);
    cmd->add_option("--data", t.data, "synthetic | fashion-mnist | fashion-mnist:DIR | images:DIR")
        ->capture_default_str();
    addSyntheticDataFlags(cmd, t.synthetic);
    batchOption = cmd->add_option("--batch", t.compile.options.batch,
                                  "global batch (default: a fixed-batch model's own, else 32)");
    addTrainingFlags(cmd, t);
    cmd->add_option("--checkpoint", t.checkpointDir, "checkpoint directory");
    cmd->add_option("--checkpoint-every", t.checkpointEvery,
                    "steps between checkpoints (default: only at the end)");
    cmd->add_option("--keep-checkpoints", t.keepCheckpoints,
                    "checkpoint files kept in --checkpoint (default 2)");
    cmd->add_flag("--resume", t.resume,
                  "continue from the newest usable checkpoint in --checkpoint (if any)");
    cmd->add_option("--metrics", t.metricsPath, "per-step metrics (.jsonl or .csv)");
    cmd->add_option("--tensorboard", t.tensorboardDir,
                    "TensorBoard event files of the run's scalars in this directory");
    cmd->add_option("--seed", t.executor.seed, "seed: same seed, same devices, same result");
    cpu.add(cmd, "CPU threads (default: all cores)");
    cmd->add_option("--loader-threads", t.loaderThreads, "input pipeline threads")
        ->capture_default_str();
    cmd->add_flag("--check-numerics", t.executor.checkNumerics,
                  "stop at the first node that produces NaN or infinity");
    cmd->add_option("--trace", t.tracePath, "Chrome/Perfetto trace of the steps");
    cmd->add_option("--profile", t.profilePath, "per-op time table");
    cmd->add_option("--eval-batch", t.evalBatch, "batch for test evaluation");
    cmd->add_flag("--no-eval", noEval, "skip test evaluation after each epoch");
    cmd->add_flag("--no-progress", noProgress, "no progress line");
    addDumpFlags(cmd, t.compile.dump, DumpFlagSet::DumpDir);
    placementFlags.add(cmd, t.placement);
    cmd->add_flag("--emulate", t.emulate,
                  "run the plan's GPUs on CPU devices (or on fewer physical GPUs)");
    taskFlags.add(cmd, t.placement, TasksFor::Training);
    cmd->add_option("--collective-timeout", collectiveTimeout,
                    "seconds a collective across workers may wait before every rank stops")
        ->capture_default_str();
    cmd->add_flag("--plain-layouts", plainLayouts,
                  "keep every activation row-major (no blocked layouts; for debugging)");
    cmd->add_option("--cuda-graphs", cudaGraphs,
                    "on GPUs, replay the step as one CUDA graph: auto (where the step allows it; "
                    "otherwise says why) | on (an error where it cannot) | off")
        ->capture_default_str();
    gpuLayout.add(cmd);
  }

  /// The flags into `t`, each checked, in the order the rules have always
  /// run (tools/driver/RunChecks.h).
  llvm::Error applyFlags() {
    CompileOptions &co = t.compile.options;
    t.progress = !noProgress;
    if (auto e = cpu.apply(t.executor))
      return e;
    if (auto e = model.applyTo(t.model))
      return e;
    if (auto e = placementFlags.checkBucket())
      return e;
    if (auto e = placementFlags.apply(co, t.placement))
      return e;
    if (auto e = placementFlags.findCalibrated(t.placement, t.emulate))
      return e;
    if (t.placement.wanted())
      printCalibrated(placementFlags.calibrated(), llvm::errs());
    t.lossScaleGiven = placementFlags.lossScaleGiven();
    t.executor.blockedLayouts = !plainLayouts;
    auto graphs = parseCudaGraphs(cudaGraphs);
    if (!graphs)
      return withContext(graphs.takeError(), "--cuda-graphs");
    t.executor.cudaGraphs = *graphs;
    if (auto e = gpuLayout.apply(t.executor))
      return e;
    t.evaluate = !noEval;
    co.seed = t.executor.seed;
    t.model.seed = t.executor.seed;
    if (auto e = checkPlacementFlags(t.placement))
      return e;
    if (auto e = taskFlags.readTasks(t.placement))
      return e;
    if (!(collectiveTimeout > 0) || !(collectiveTimeout <= 1e6))
      return makeError("--collective-timeout " + numberText(collectiveTimeout) +
                       ": must be a positive number of seconds (at most 1000000)");
    return llvm::Error::success();
  }

  int run() {
    // First: every thread started from here on (OpenMP's, oneDNN's, MPI's,
    // the loaders') blocks SIGINT and SIGTERM.
    const StopFlags &stop = watchStopSignals();
    t.batchGiven = batchOption->count() > 0;
    if (auto e = applyFlags())
      return fail(std::move(e));
    // Under mpirun: MPI starts here, every rank runs its part of the plan.
    auto launched = launchedWorld(std::getenv);
    if (!launched)
      return fail(launched.takeError());
    t.launched = *launched;
    auto workers = startWorkers(t.launched);
    if (!workers)
      return fail(workers.takeError());
    Workers &w = **workers;
    t.workersSource = taskFlags.workersFrom(t.placement, t.launched);
    w.setTimeout(std::chrono::milliseconds((int64_t)std::ceil(collectiveTimeout * 1000)));
    t.stopRequested = &stop.signal;
    w.watchStop(&stop);
    auto r = runTraining(t, llvm::outs(), w);
    if (!r) {
      if (w.size() > 1)
        fail(makeError(w.whoAmI() + ": " + llvm::toString(r.takeError())));
      else
        fail(r.takeError());
      // Past the start-up rendezvous the other ranks may wait on this one
      // (or this one on a stalled rank): end them all. Before it, every rank
      // meets the same error.
      if (w.size() > 1 && w.collectives().rendezvousDone())
        w.abortAll(1);
      w.finish();
      return 1;
    }
    w.finish();
    return r->stoppedBySignal ? 128 + r->stoppedBySignal : 0;
  }
};

struct LaunchCommand {
  ElasticOptions o;
  std::string elastic, mpirun = "mpirun";
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand("launch", "train under mpirun, restarting from the newest checkpoint "
                                       "on the hosts still answering when a worker or host fails "
                                       "(flags of `train` after --)");
    cmd->add_option("--hostfile", o.hostfile, "mpirun's hostfile: NAME slots=N per line")
        ->required();
    cmd->add_option("--elastic", elastic, "MIN:MAX workers: fewer than MIN answering ends the run")
        ->required();
    cmd->add_option("--mpirun", mpirun, "the mpirun to start each segment with")
        ->capture_default_str();
    cmd->add_option("--max-restarts", o.maxRestarts, "restarts before giving up")
        ->capture_default_str();
    cmd->add_option("--probe-timeout", o.probeTimeout,
                    "seconds a host may take to start a process before it counts as lost")
        ->capture_default_str();
    cmd->add_option("TRAIN", o.trainArgs, "graphrun train's flags (after --)")->required();
  }

  int run(const char *argv0) {
    if (auto e = parseElasticRange(elastic, o.minWorkers, o.maxWorkers))
      return fail(std::move(e));
    if (!(o.probeTimeout >= 1) || !(o.probeTimeout <= 3600))
      return fail(makeError("--probe-timeout " + numberText(o.probeTimeout) +
                            ": must be 1 to 3600 seconds"));
    o.mpirun = {mpirun};
    static int anchor;
    o.graphrun = llvm::sys::fs::getMainExecutable(argv0, &anchor);
    auto rc = runElastic(o, llvm::outs());
    if (!rc)
      return fail(rc.takeError());
    return *rc;
  }
};

struct EvalCommand {
  std::string checkpoint, data;
  int64_t batch = 100;
  bool trainSplit = false;
  std::optional<uint64_t> seed;
  SyntheticData synthetic;
  CpuFlags cpu;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand("eval", "accuracy of a checkpoint on a data set");
    cmd->add_option("--checkpoint", checkpoint, "checkpoint file or directory")->required();
    cmd->add_option("--data", data,
                    "data set (default: the one the checkpoint was trained on; synthetic | "
                    "fashion-mnist | fashion-mnist:DIR | images:DIR)");
    cmd->add_option("--batch", batch, "batch")->capture_default_str();
    cmd->add_flag("--train-split", trainSplit, "evaluate on the training split");
    cpu.add(cmd, "CPU threads");
    cmd->add_option("--seed", seed,
                    "seed of the synthetic data (default: the checkpoint's training seed)");
    addSyntheticDataFlags(cmd, synthetic);
  }

  int run() {
    ExecutorOptions exec;
    if (auto e = cpu.apply(exec))
      return fail(std::move(e));
    if (auto e = checkAtLeast("--batch", batch, 1, "the batch"))
      return fail(std::move(e));
    auto model = loadModel({checkpoint, "", {}, 0, batch});
    if (!model)
      return fail(model.takeError());
    exec.seed = seed.value_or(model->checkpointSeed);
    if (data.empty())
      data = dataOfIdentity(model->checkpointData, synthetic);
    auto r = runEvaluation(*model->forward, data, !trainSplit, batch, exec, synthetic);
    if (!r)
      return fail(r.takeError());
    llvm::outs() << (trainSplit ? "train " : "test ") << r->describe() << "\n";
    return 0;
  }
};

struct InferCommand {
  InferOptions inf;
  CpuFlags cpu;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand("infer", "run a model on a NumPy input, write .npy outputs");
    cmd->add_option("MODEL", inf.model, kModelFileHelp)->required();
    cmd->add_option("--input", inf.inputs, "input .npy (one per graph input, in order), .npz (arrays named after the inputs, "
                    "or x), or image files (.jpg/.png: one batch for an image input)")
        ->required();
    cmd->add_option("-o,--output", inf.output, "output .npy (several outputs: NAME.K.npy)")
        ->required();
    cpu.add(cmd, "CPU threads");
    cmd->add_option("--repeat", inf.repeat, "time this many runs after a warm-up run")
        ->check(CLI::Range(1, 1000000));
    cmd->add_flag("--profile", inf.profile, "print where the time went, per op and node");
  }

  int run() {
    if (auto e = cpu.apply(inf.executor))
      return fail(std::move(e));
    if (auto e = runInference(inf, llvm::outs()))
      return fail(std::move(e));
    return 0;
  }
};

struct ExportCommand {
  std::string checkpoint;
  ExportFlags flags;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand("export", "a checkpoint's trained model as ONNX, for onnxruntime "
                                       "(inference form; --training-graph to train again)");
    cmd->add_option("--checkpoint", checkpoint, "checkpoint file or directory")->required();
    flags.add(cmd);
  }

  int run() {
    auto model = loadModel({checkpoint, "", {}, 0});
    if (!model)
      return fail(model.takeError());
    if (auto e = exportOnnxFile(*model->forward, flags.output, 0, flags.form()))
      return fail(std::move(e));
    llvm::outs() << "wrote " << flags.output << "\n";
    return 0;
  }
};

struct CalibrateCommand {
  CalibrateRequest cal;
  std::optional<int64_t> threads;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand(
        "calibrate", "measure this machine's devices and links, write them into a cluster file");
    cmd->add_option("--cluster", cal.clusterFile, "the cluster file to calibrate")->required();
    cmd->add_flag("--emulate", cal.emulate,
                  "measure the CPU devices that stand for the cluster's GPUs");
    cmd->add_option("-o,--output", cal.output, "write here instead of over --cluster");
    cmd->add_option("--gpu-model", cal.gpuModel,
                    "the model of GPU the figures are for, recorded in the file (default: the "
                    "physical GPUs'; with --emulate, none)");
    cmd->add_option("--threads", threads, "CPU threads (default: all cores)");
    cmd->add_option("--steps", cal.steps, "calibration steps per run")->capture_default_str();
    cmd->add_option("--model", cal.model, "the calibration workload, a built-in model")
        ->capture_default_str();
    cmd->add_option("--image-size", cal.imageSize, "its input side")->capture_default_str();
    cmd->add_option("--per-device", cal.perDevice, "its images per device")->capture_default_str();
  }

  int run() {
    auto n = threadsFrom(threads);
    if (!n)
      return fail(n.takeError());
    cal.threads = *n;
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
};

int run(int argc, char **argv) {
  CLI::App app{"graphrun: train and run graphc models"};
  app.require_subcommand(1);
  // Given before or after the subcommand (fallthrough), for every subcommand.
  app.fallthrough();
  MemoryLimitFlag memoryLimit;
  memoryLimit.add(app);
  TrainCommand train;
  train.add(app);
  LaunchCommand launch;
  launch.add(app);
  EvalCommand eval;
  eval.add(app);
  InferCommand infer;
  infer.add(app);
  ExportCommand exp;
  exp.add(app);
  CLI::App *cpu = app.add_subcommand(
      "cpu", "the CPU and the instruction sets our code and oneDNN run at (GRAPHC_CPU_ISA caps "
             "both: avx512, avx2 or default)");
  CalibrateCommand calibrate;
  calibrate.add(app);

  if (auto status = parseCommandLine(app, argc, argv, "graphrun"))
    return *status;
  if (auto e = checkCpuIsaSetting())
    return fail(std::move(e));
  if (*cpu) {
    llvm::outs() << describeCpuIsa() << "\n";
    return 0;
  }
  if (auto e = memoryLimit.apply())
    return fail(std::move(e));
  pauseWritesIfTesting();
  if (*train.cmd)
    return train.run();
  if (*launch.cmd)
    return launch.run(argv[0]);
  if (*eval.cmd)
    return eval.run();
  if (*infer.cmd)
    return infer.run();
  if (*calibrate.cmd)
    return calibrate.run();
  if (*exp.cmd)
    return exp.run();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  ignoreFileSizeSignal();
  return finishOutput(run(argc, argv), "graphrun");
}
