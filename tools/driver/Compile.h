//===- Compile.h - Forward model to runnable module --------------*- C++ -*-===//
//
// The compiles the tools run:
//   training   the pass pipeline written down in passes/Passes.cpp (or
//              --pipeline), on one device or, with towers, on emulated ones;
//   placed     training for a cluster (--gpus N or a cluster file): the
//              training pipeline, then placement and transfers; the placed
//              module also keeps the single-device forward graph as graph
//              "forward", so evaluation and checkpoints need nothing else;
//   inference  bind the batch, verify.
// All start from a copy, so one forward model can yield several.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"
#include "ir/Tasks.h"
#include "passes/Pass.h"

#include <memory>
#include <optional>

namespace graphc {

/// The tower modes as a command line spells them (--params, --bn,
/// --remainder, --split; empty split: even shares).
struct TowerModeFlags {
  std::string params = "cpu", bn = "local", remainder = "uneven", split, precision = "fp32";
  /// --loss-scale (empty: off, or kDefaultFp16LossScale with fp16) and
  /// --loss-scale-interval.
  std::string lossScale, lossScaleInterval = "2000";
};
/// Parses them once into the typed options; an error names the flag.
llvm::Error parseTowerModes(const TowerModeFlags &flags, CompileOptions &into);

struct CompileRequest {
  CompileOptions options;
  DumpOptions dump;
  std::string pipeline; ///< empty: kDefaultTrainingPipeline
};

struct PlacementRequest {
  int gpus = 0;            ///< --gpus N (0: no placement)
  std::string clusterFile; ///< or a cluster description
  bool softPlacement = true;
  /// --towers: GPU towers (one per GPU when unset, 0: the single-device
  /// graph placed on the cluster); more towers than GPUs is an error.
  std::optional<int> towers;
  /// --workers W: the plan spans W processes (MPI ranks), each with the
  /// devices above; the towers of all workers are planned together
  /// (passes/WorkerPart.h) and meta `workers` records W.
  int workers = 1;
  /// Or the tasks of a cluster file or TF_CONFIG (ir/Tasks.h): its
  /// chief and workers, each with its own GPUs (given a default by --gpus),
  /// and its ps tasks. The plan records them (meta `tasks`).
  std::optional<TaskCluster> tasks;
  /// Where `tasks` came from, for messages: "--tasks FILE" or "TF_CONFIG".
  std::string tasksSource;
  /// --ps P: P parameter-server tasks besides the workers hold the updated
  /// variables and their optimizer slots (passes/PsPart.h); --ps-async: each
  /// worker's update is applied as it arrives.
  int ps = 0;
  bool psAsync = false;
  /// --strategy: towers per device (data-parallel), or one replica spread
  /// over the devices (model-parallel; tools/driver/CompileModelParallel.h).
  Strategy strategy = Strategy::DataParallel;
  /// --params auto also tries other all-reduce bucket caps (not when
  /// --bucket-mb was given).
  bool searchBuckets = true;
  bool wanted() const { return tasks ? tasks->hasGpus() : gpus > 0 || !clusterFile.empty(); }
  /// The training workers' GPUs (one entry per worker; 0: a host tower).
  std::vector<unsigned> workerGpus() const;
  /// The ps tasks: the cluster's, or --ps.
  unsigned psTasks() const { return tasks ? tasks->numPs() : (unsigned)std::max(0, ps); }
};

llvm::Expected<std::unique_ptr<Module>> compileTraining(const Module &forward,
                                                        const CompileRequest &req);
llvm::Expected<Cluster> clusterFor(const PlacementRequest &place);
/// Whether the kernel registry runs `n` on devices of type `t` (a build
/// without CUDA kernels plans as a CUDA build would, from the CPU's).
bool kernelFor(const Node &n, DeviceKind t);
/// The global batch of a placed compile given no batch, for a model whose
/// batch is symbolic: this many samples per tower.
inline constexpr int64_t kDefaultBatchPerTower = 32;
/// Training compiled for a cluster: one tower per GPU unless place.towers
/// says otherwise; with no batch given and a symbolic one in the model,
/// kDefaultBatchPerTower per tower. With several workers (place.workers or
/// place.tasks), one tower per GPU of every worker, in rank order (tower t
/// on gpu:t), recorded by recordWorkers.
llvm::Expected<std::unique_ptr<Module>> compilePlaced(const Module &forward, CompileRequest req,
                                                      const PlacementRequest &place);
/// One line on how a placed plan shares its batch among the towers and why
/// (--split weights, or auto and the devices' speeds); "" for even shares.
std::string describeSplit(const Module &plan);
/// With place.ps > 0, shards the plan's variables over the ps tasks
/// (shardOverPs); nothing otherwise.
llvm::Error addPsTasks(Module &plan, const PlacementRequest &place);
/// The forward graph bound to `batch`, with its Conv -> Relu pairs fused and
/// zero Pads folded into average pools (passes/InferenceFusion.h), for CPU
/// devices (evaluation, infer).
llvm::Expected<std::unique_ptr<Module>> compileInference(const Module &forward, int64_t batch);

/// Records in a plan for several workers (or from a cluster of tasks) its
/// workers, their towers and its tasks (PlanInfo::workers, workerTowers,
/// tasks); nothing for one worker without tasks.
void recordWorkers(Module &plan, const PlacementRequest &place,
                   llvm::ArrayRef<unsigned> towersPerWorker);

/// True for a module the training pipeline already produced (a module file
/// from `graphc compile` or `graphc place`).
bool isCompiledForTraining(const Module &m);
/// True when its nodes carry assigned devices.
bool isPlaced(const Module &m);
/// The single-device forward model a compiled module keeps (graph "forward").
llvm::Expected<std::unique_ptr<Module>> forwardOf(const Module &compiled);
/// The module as the executor sees it: without the kept forward graph (for
/// reports and views).
std::unique_ptr<Module> runnablePart(const Module &compiled);

} // namespace graphc
