//===- CompileRequest.h - What a compile is asked for, typed ------*- C++ -*-===//
//
// A compile's request as the tools hand it to the compiler (CompileStrategy.h),
// with every flag already parsed: the pass options and dumps
// (CompileRequest), and the devices, processes and strategy of the plan
// (PlacementRequest). The helpers every strategy shares: the cluster a
// request names (clusterFor) and whether a kernel exists for a node on a
// kind of device (kernelFor, the placer's kernel availability).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"
#include "ir/Tasks.h"
#include "passes/Pass.h"

#include <optional>
#include <string>
#include <vector>

namespace graphc {

struct CompileRequest {
  CompileOptions options;
  DumpOptions dump;
  std::string pipeline; ///< --pipeline: registered pass names; empty: kDefaultTrainingPipeline
};

struct PlacementRequest {
  int gpus = 0;            ///< --gpus N (0: no placement)
  std::string clusterFile; ///< or a cluster description
  /// --gpus N as N copies of the GPU of this calibrated cluster file
  /// (Cluster::ofCalibrated); the tools find it by the GPU's model. Empty:
  /// the default cluster's figures.
  std::string calibratedFile;
  /// Or the cluster itself (the fit advisor's larger clusters,
  /// passes/strategy/FitAdvisor.h); before clusterFile.
  std::optional<Cluster> cluster;
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
  /// --strategy: towers per device (data-parallel), one replica spread
  /// over the devices (model-parallel; ModelParallelStrategy.h), or stages
  /// of it fed micro-batches (pipeline; PipelineStrategy.h).
  Strategy strategy = Strategy::DataParallel;
  /// --stages S (--strategy pipeline): stages per pipeline; unset: one
  /// pipeline over every GPU. GPUs / S pipelines, data parallel.
  std::optional<int> stages;
  /// --params auto also tries other all-reduce bucket caps (not when
  /// --bucket-mb was given).
  bool searchBuckets = true;
  /// Without devices (wanted() false) the plan is the host's, one tower per
  /// worker (graphrun train); false: devices are needed (graphc place), and
  /// their absence is an error.
  bool hostWithoutDevices = true;
  bool wanted() const {
    return tasks ? tasks->hasGpus() : gpus > 0 || !clusterFile.empty() || cluster.has_value();
  }
  /// The training workers' GPUs (one entry per worker; 0: a host tower).
  std::vector<unsigned> workerGpus() const;
  /// The ps tasks: the cluster's, or --ps.
  unsigned psTasks() const { return tasks ? tasks->numPs() : (unsigned)std::max(0, ps); }
  /// The host's plan: no devices, and it may be.
  bool onHost() const { return !wanted() && hostWithoutDevices; }
};

/// The cluster a placed compile is for: the one given, the cluster file's,
/// or --gpus GPUs of the calibrated file's model or of the default cluster.
llvm::Expected<Cluster> clusterFor(const PlacementRequest &place);
/// Whether the kernel registry runs `n` on devices of kind `kind` (a build
/// without CUDA kernels plans as a CUDA build would, from the CPU's).
bool kernelFor(const Node &n, DeviceKind kind);
/// The global batch of a compile given no batch, for a model whose batch is
/// symbolic: `graphrun train`'s default, the whole step's samples (a pipeline
/// rounds it up to a multiple of its micro-batches).
inline constexpr int64_t kDefaultBatch = 32;

} // namespace graphc
