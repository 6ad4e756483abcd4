#include "tools/driver/FlagGroups.h"

#include "ir/Diagnostics.h"
#include "ir/MemoryLimit.h"
#include "ir/Modes.h"
#include "kernels/Kernel.h"
#include "passes/AccumulateGradients.h"
#include "passes/LossScaling.h"
#include "tools/driver/TrainOptions.h"

#include <CLI/CLI.hpp>

namespace graphc {

void MemoryLimitFlag::add(CLI::App &app) {
  app.add_option("--memory-limit", size,
                 "refuse tensors and host allocations beyond SIZE (e.g. 8G) before allocating");
}

llvm::Error MemoryLimitFlag::apply() const {
  return size ? applyMemoryLimitFlag(*size) : llvm::Error::success();
}

void ModelSourceFlags::add(CLI::App *cmd, bool dropout) {
  cmd->add_option("MODEL", path, kModelFileHelp);
  cmd->add_option("--model", name,
                  "a built-in model (inception_v3, resnet18, resnet50, small_cnn, "
                  "small_cnn_nobn, mlp)");
  cmd->add_option("--num-classes", flags.numClasses, "classes of a built-in model");
  cmd->add_option("--image-size", flags.imageSize, "input side of a built-in model");
  cmd->add_flag("--aux-logits", flags.auxLogits, "inception_v3's auxiliary head");
  if (dropout)
    cmd->add_option("--dropout", flags.dropout,
                    "dropout ratio of a built-in model that has dropout (default: its own)");
}

llvm::Error ModelSourceFlags::applyTo(ModelSpec &spec) const {
  spec.path = path;
  spec.name = name;
  return applyModelFlags(flags, spec);
}

llvm::Error parseTowerModes(const TowerModeFlags &flags, CompileOptions &into) {
  auto params = parseParamPlacement(flags.params);
  if (!params)
    return withContext(params.takeError(), "--params");
  auto bn = parseBnMode(flags.bn);
  if (!bn)
    return withContext(bn.takeError(), "--bn");
  auto remainder = parseRemainderPolicy(flags.remainder);
  if (!remainder)
    return withContext(remainder.takeError(), "--remainder");
  auto precision = parsePrecision(flags.precision);
  if (!precision)
    return withContext(precision.takeError(), "--precision");
  into.precision = *precision;
  if (!flags.loss.empty()) {
    auto loss = parseLossKind(flags.loss);
    if (!loss)
      return withContext(loss.takeError(), "--loss");
    into.loss = *loss;
  }
  into.lossScale = *precision == Precision::FP16 ? kDefaultFp16LossScale : 0;
  if (!flags.lossScale.empty()) {
    auto scale = parseLossScale(flags.lossScale);
    if (!scale)
      return scale.takeError(); // its message names --loss-scale
    into.lossScale = *scale;
  }
  int64_t interval = 0;
  if (llvm::StringRef(flags.lossScaleInterval).trim().getAsInteger(10, interval) || interval < 1)
    return makeError("--loss-scale-interval " + flags.lossScaleInterval +
                     ": must be a whole number of steps, at least 1");
  into.lossScaleInterval = interval;
  into.params = *params;
  into.bn = *bn;
  into.remainder = *remainder;
  into.split = SplitSpec();
  if (!flags.split.empty()) {
    auto split = parseSplitSpec(flags.split);
    if (!split)
      return split.takeError(); // its message names --split
    into.split = std::move(*split);
  }
  return llvm::Error::success();
}

void addGpuModelFlag(CLI::App *cmd, std::string &model) {
  cmd->add_option("--gpu-model", model,
                  "--gpus N as GPUs of this model with its calibrated figures (a file in the "
                  "calibrated clusters' folder, $GRAPHC_CLUSTERS or clusters/): a model name, "
                  "auto (this machine's GPU's, where a file is kept) or none (default figures)")
      ->capture_default_str();
}

void PlacementFlags::add(CLI::App *cmd, PlacementRequest &place) {
  cmd->add_option("--gpus", place.gpus,
                  "GPUs of the default or calibrated cluster (one tower each)");
  cmd->add_option("--cluster", place.clusterFile, "compile for the devices of a cluster file");
  addGpuModelFlag(cmd, gpuModel_);
  gpuModelOption_ = cmd->get_option("--gpu-model");
  cmd->add_option("--params", modes_.params,
                  "where variables live: cpu | gpu:K | spread | mirrored | auto (by predicted "
                  "step under memory)")
      ->capture_default_str();
  cmd->add_option("--bn", modes_.bn, "BatchNorm across towers: local | sync | frozen")
      ->capture_default_str();
  cmd->add_option("--precision", modes_.precision,
                  "fp32 | bf16 (convolutions, batch norms, activations in bf16 with f32 master "
                  "weights; CPU devices with bf16 instructions) | fp16 (the same in fp16 with "
                  "dynamic loss scaling; GPUs, or --emulate)")
      ->capture_default_str();
  cmd->add_option("--loss", modes_.loss,
                  "cross-entropy (softmax, on logits [N, classes]; the default, or what a "
                  "checkpoint was trained with) | nll (on log-probabilities) | mse (on any "
                  "output [N, ...], against float targets: --data npz:FILE)");
  lossScaleOption_ = cmd->add_option(
      "--loss-scale", modes_.lossScale,
      "dynamic loss scaling from this initial scale, or off (fp16: 65536, others: off)");
  cmd->add_option("--loss-scale-interval", modes_.lossScaleInterval,
                  "finite steps before the loss scale doubles")
      ->capture_default_str();
  cmd->add_option("--remainder", modes_.remainder,
                  "a batch that does not divide by the towers: error | drop | uneven")
      ->capture_default_str();
  cmd->add_option("--split", modes_.split, "per-device batch weights, e.g. 4,4,2, or auto");
  cmd->add_option("--strategy", strategy_,
                  "data-parallel (a tower per device) | model-parallel (one replica spread "
                  "over the devices by m-ETF under their memory) | pipeline (stages of one "
                  "replica on the GPUs, micro-batches through them)")
      ->capture_default_str();
  microBatchesOption_ = cmd->add_option(
      "--micro-batches", microBatches_,
      "--strategy pipeline: micro-batches per pipeline and step (the batch split M ways; one "
      "update from their summed gradients)");
  microBatchesOption_->capture_default_str();
  stagesOption_ = cmd->add_option("--stages", place.stages,
                                  "--strategy pipeline: stages per pipeline, cut by the cost "
                                  "model (default: every GPU; --gpus N gives N/S pipelines)");
  scheduleOption_ = cmd->add_option("--pipeline-schedule", schedule_,
                                    "--strategy pipeline: 1f1b (at most S micro-batches' "
                                    "activations per stage) | gpipe (all M)");
  scheduleOption_->capture_default_str();
  bucketOption_ =
      cmd->add_option("--bucket-mb", bucketMb_, "all-reduce bucket cap in MB (mirrored)");
  bucketOption_->capture_default_str();
  cmd->add_flag("--shard-optimizer", shardOptimizer_,
                "with --params mirrored: each replica keeps and updates 1/N of the optimizer "
                "state (gradients reduce-scattered, updated weights all-gathered; the same "
                "update as without)");
  cmd->add_option("--accumulate", accumulate_,
                  "K micro-batches of --batch per update (gradient accumulation: one update on "
                  "K x batch samples, gradients aggregated once per update; training steps and "
                  "the lr schedule count updates)")
      ->capture_default_str();
  cmd->add_option("--recompute", recompute_,
                  "auto | off: where a placed plan does not fit its devices' memory, drop the "
                  "activations cheapest to recompute and compute them again in the backward "
                  "pass, as few as fit (passes/Recompute.h)")
      ->capture_default_str();
}

llvm::Error PlacementFlags::checkBucket() const {
  return checkBucketMb(bucketMb_);
}

llvm::Error PlacementFlags::apply(CompileOptions &options, PlacementRequest &place) const {
  options.bucketBytes = (int64_t)(bucketMb_ * 1e6);
  options.shardOptimizer = shardOptimizer_;
  place.searchBuckets = bucketOption_->count() == 0;
  if (auto e = parseTowerModes(modes_, options))
    return e;
  auto strategy = parseStrategy(strategy_);
  if (!strategy)
    return withContext(strategy.takeError(), "--strategy");
  place.strategy = *strategy;
  if (auto e = applyPipeline(options, place))
    return e;
  auto steps = parseAccumulateSteps(accumulate_);
  if (!steps)
    return steps.takeError();
  options.accumulate = *steps;
  auto recompute = parseRecomputeMode(recompute_);
  if (!recompute)
    return recompute.takeError();
  options.recompute.mode = *recompute;
  return llvm::Error::success();
}

llvm::Error PlacementFlags::applyPipeline(CompileOptions &options,
                                          const PlacementRequest &place) const {
  const bool pipeline = place.strategy == Strategy::Pipeline;
  for (CLI::Option *o : {microBatchesOption_, stagesOption_, scheduleOption_})
    if (o->count() > 0 && !pipeline)
      return makeError(o->get_name() + " goes with --strategy pipeline (the strategy is " +
                       modeName(place.strategy) + ")");
  if (microBatches_ < 1)
    return makeError("--micro-batches " + std::to_string(microBatches_) +
                     ": a pipeline needs one micro-batch at least");
  auto schedule = parsePipelineSchedule(schedule_);
  if (!schedule)
    return withContext(schedule.takeError(), "--pipeline-schedule");
  options.pipeline.microBatches = (unsigned)microBatches_;
  options.pipeline.schedule = *schedule;
  return llvm::Error::success();
}

bool PlacementFlags::lossScaleGiven() const {
  return lossScaleOption_->count() > 0;
}

llvm::Error PlacementFlags::findCalibrated(PlacementRequest &place, bool emulated) {
  if (!place.clusterFile.empty()) {
    if (gpuModelOption_->count() > 0)
      return makeError("--gpu-model goes with --gpus: a cluster file (--cluster " +
                       place.clusterFile + ") has its own figures");
    return llvm::Error::success();
  }
  auto found = findCalibratedGpu(gpuModel_, emulated);
  if (!found)
    return found.takeError();
  calibrated_ = std::move(*found);
  place.calibratedFile = calibrated_.file;
  return llvm::Error::success();
}

void TaskFlags::add(CLI::App *cmd, PlacementRequest &place, TasksFor use) {
  use_ = use;
  const bool training = use == TasksFor::Training;
  workersOption_ = cmd->add_option(
      "--workers", place.workers,
      std::string("worker processes (mpirun -np W), each with the GPUs of --gpus") +
          (training ? "; without it, the launcher's processes (mpirun, srun) less the ps tasks"
                    : ""));
  workersOption_->capture_default_str();
  cmd->add_option("--tasks", file_,
                  std::string("the run's tasks by role (chief, worker, ps) with each one's host "
                              "and GPUs (a cluster file or a TF_CONFIG") +
                      (training ? ", read from the environment when not given" : "") +
                      "; tasks without GPUs get --gpus)");
  cmd->add_option("--ps", place.ps,
                  std::string("parameter-server tasks holding the variables, sharded by bytes "
                              "(the last P ranks of mpirun -np W+P") +
                      (training ? "; without --workers, the other ranks train" : "") + ")")
      ->capture_default_str();
  cmd->add_flag("--ps-async", place.psAsync,
                "ps tasks apply each worker's update as it arrives (no step barrier); the chief "
                "reports the staleness");
}

llvm::Error TaskFlags::readTasks(PlacementRequest &place) const {
  const unsigned gpus = (unsigned)std::max(0, place.gpus);
  if (!file_.empty()) {
    if (place.workers > 1)
      return makeError("--tasks and --workers both give the workers; use one");
    auto tasks = loadTasksFile(file_, gpus);
    if (!tasks)
      return tasks.takeError();
    if (use_ == TasksFor::Placement && !tasks->hasGpus())
      return makeError(file_ + ": no chief or worker task has GPUs to place towers on (give "
                               "them \"gpus\", or --gpus)");
    place.tasks = std::move(*tasks);
    place.tasksSource = "--tasks " + file_;
    return llvm::Error::success();
  }
  if (use_ == TasksFor::Placement)
    return llvm::Error::success();
  auto tasks = tasksFromEnvironment(gpus);
  if (!tasks)
    return tasks.takeError();
  if (!*tasks)
    return llvm::Error::success();
  // TF_CONFIG's cluster is the launcher's word on the workers: --workers may
  // repeat it, not contradict it.
  const unsigned fromConfig = (*tasks)->numWorkers();
  if (workersOption_->count() > 0 && (unsigned)std::max(0, place.workers) != fromConfig)
    return makeError("--workers " + std::to_string(place.workers) +
                     ", but TF_CONFIG's cluster has " + std::to_string(fromConfig) +
                     " training task" + (fromConfig == 1 ? "" : "s") +
                     " (chief and workers): leave --workers out, or unset TF_CONFIG");
  place.tasks = std::move(**tasks);
  place.tasksSource = "TF_CONFIG";
  return llvm::Error::success();
}

WorkersSource TaskFlags::workersFrom(PlacementRequest &place, const LaunchedWorld &launched) const {
  if (workersOption_->count() > 0)
    return WorkersSource::Flag;
  if (place.tasks)
    return WorkersSource::Tasks;
  if (launched.launcher == Launcher::None)
    return WorkersSource::Default;
  const unsigned ps = (unsigned)std::max(0, place.ps);
  place.workers = launched.size > ps ? (int)(launched.size - ps) : 1;
  return WorkersSource::Launcher;
}

void addOptimizerFlag(CLI::App *cmd, std::string &optimizer) {
  cmd->add_option("--optimizer", optimizer, "sgd | momentum | rmsprop | adam")
      ->capture_default_str();
}

void addDumpFlags(CLI::App *cmd, DumpOptions &dump, DumpFlagSet set) {
  cmd->add_option("--dump-dir", dump.dumpDir,
                  "write the IR after every pass, numbered: NNNN.after_<pass>.gir");
  if (set == DumpFlagSet::DumpDir)
    return;
  if (set == DumpFlagSet::Placement)
    cmd->add_flag("--dump-dot", dump.dumpDot, "also write a .dot per pass");
  cmd->add_flag("--print-ir-after-all", dump.printAfterAll, "print IR after every pass");
  cmd->add_option("--print-ir-after", dump.printAfter, "print IR after these passes");
  cmd->add_flag("--time-passes", dump.timePasses,
                set == DumpFlagSet::Placement
                    ? "wall time of every pass, and of reading the model and writing the module"
                    : "wall time of every pass");
}

void addTrainingFlags(CLI::App *cmd, TrainOptions &t) {
  CompileOptions &co = t.compile.options;
  cmd->add_option("--steps", t.steps, "the run's steps in all (a resumed run trains the rest)");
  cmd->add_option("--epochs", t.epochs, "the run's epochs in all (instead of --steps)");
  cmd->add_option("--more-steps", t.moreSteps, "this many steps past the checkpoint");
  addOptimizerFlag(cmd, co.optimizer);
  cmd->add_option("--lr", co.learningRate, "learning rate")->capture_default_str();
  cmd->add_option("--lr-schedule", t.lrSchedule, "constant | cosine | step:EPOCHS:FACTOR")
      ->capture_default_str();
  cmd->add_option("--momentum", co.momentum, "momentum (momentum, rmsprop)")->capture_default_str();
  cmd->add_flag("--nesterov", co.nesterov, "Nesterov momentum");
  cmd->add_option("--weight-decay", co.weightDecay, "L2 weight decay")->capture_default_str();
  cmd->add_flag("--scale-lr", t.scaleLrByTowers, "multiply --lr by the number of towers (pipelines under --strategy pipeline)");
}

void addSyntheticDataFlags(CLI::App *cmd, SyntheticData &data) {
  cmd->add_option("--synthetic-samples", data.samples,
                  "size of the synthetic data set (default: 4096)");
  cmd->add_option("--synthetic-classes", data.classes,
                  "synthetic labels use this many of the model's classes (0: all; default: "
                  "10, or all when the model has fewer)");
}

llvm::Expected<int> threadsFrom(const std::optional<int64_t> &given) {
  if (auto e = checkThreadCount("--threads", given))
    return e;
  return given ? (int)*given : 0;
}

void CpuFlags::add(CLI::App *cmd, llvm::StringRef threadsHelp) {
  cmd->add_option("--threads", threads, threadsHelp.str());
  cmd->add_option("--conv-algorithm", convAlgorithm,
                  "auto (Winograd for the 3x3 stride-1 convolutions where it pays, f32 on "
                  "AVX-512) | direct | winograd (wherever the CPU has it)")
      ->capture_default_str();
  cmd->add_option("--cpu-layout", layout,
                  "4-d activations on CPU devices: auto (blocked; bf16 channels-last where the "
                  "CPU has AMX, whose convolutions compute in it) | nhwc (channels-last for f32 "
                  "and bf16) | blocked (never channels-last)")
      ->capture_default_str();
}

llvm::Error CpuFlags::apply(ExecutorOptions &exec) const {
  auto n = threadsFrom(threads);
  if (!n)
    return n.takeError();
  auto algorithm = parseConvAlgorithm(convAlgorithm);
  if (!algorithm)
    return withContext(algorithm.takeError(), "--conv-algorithm");
  auto layout = parseCpuLayout(this->layout);
  if (!layout)
    return withContext(layout.takeError(), "--cpu-layout");
  exec.threads = *n;
  exec.convAlgorithm = *algorithm;
  exec.cpuLayout = *layout;
  return llvm::Error::success();
}

void GpuLayoutFlag::add(CLI::App *cmd) {
  cmd->add_option("--gpu-layout", layout,
                  "activations on GPUs: auto (channels-last for f16 and bf16, where cuDNN's "
                  "tensor-core convolutions compute; NCHW for f32) | nhwc (channels-last for f32 "
                  "too) | nchw (never)")
      ->capture_default_str();
}

llvm::Error GpuLayoutFlag::apply(ExecutorOptions &exec) const {
  auto l = parseGpuLayout(layout);
  if (!l)
    return withContext(l.takeError(), "--gpu-layout");
  exec.gpuLayout = *l;
  return llvm::Error::success();
}

void ExportFlags::add(CLI::App *cmd) {
  cmd->add_option("-o,--output", output, "ONNX file to write")->required();
  cmd->add_flag("--training-graph", trainingGraph,
                "write the training form (BatchNorm and Dropout in training mode, to train "
                "again) instead of the inference form a deployment runs");
}

} // namespace graphc
