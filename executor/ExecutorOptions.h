//===- ExecutorOptions.h - How an executor binds and runs --------*- C++ -*-===//
//
// The options of Executor::create (executor/Executor.h), apart so that the
// executor's state (ExecutorImpl.h) needs no more of the public interface.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/StepCapture.h"
#include "ir/DeviceId.h"
#include "kernels/Kernel.h"

#include "llvm/ADT/StringMap.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace graphc {

class CrossWorkerExchange;
class CrossWorkerReducer;

struct ExecutorOptions {
  int threads = 0; ///< CPU threads for all CPU devices together; 0: all cores
  uint64_t seed = 0;
  /// Stop at the first node producing a NaN or infinity, naming it.
  bool checkNumerics = false;
  /// Per-node timings (profile()) and timeline events (trace()).
  bool profile = false;
  /// Maps a node's device (its assigned device; the host, cpu:0, for an
  /// unplaced node) to the device that runs it. Default: unchanged.
  std::function<DeviceId(DeviceId)> deviceMap;
  /// Keep 4-d activations in the blocked layout (oneDNN's nChw<B>c, B the
  /// block its convolutions choose on this CPU) between kernels that can take
  /// it (convolutions, batch norms, pools, elementwise, concat and split),
  /// where the convolutions around them compute in it.
  bool blockedLayouts = true;
  /// Which of those CPU activations are channels-last (NHWC) instead
  /// (kernels/ChannelsLast.h): auto for bf16 where the CPU has AMX, nhwc
  /// for f32 and bf16 anywhere, blocked never.
  CpuLayout cpuLayout = CpuLayout::Auto;
  /// Which 4-d activations GPU devices keep channels-last (NHWC) between
  /// kernels that can take it (kernels/ChannelsLast.h): auto for f16 and
  /// bf16, nhwc for f32 too, nchw never (executor/LayoutAssignment.h).
  GpuLayout gpuLayout = GpuLayout::Auto;
  /// How CPU convolutions compute (kernels/Kernel.h).
  ConvAlgorithm convAlgorithm = ConvAlgorithm::Auto;
  /// Run adjacent variable updates of a device with one fusion key as one
  /// multi-tensor launch (Kernel::runGroup); off: one launch per node.
  bool fuseUpdates = true;
  /// How long a device waits for another device or a collective.
  std::chrono::milliseconds waitTimeout{std::chrono::minutes(5)};
  /// Emulated heterogeneity: a CPU device's speed relative to the hardware
  /// that runs it, by the device that runs it (cpu:2); absent
  /// or 1: full speed. A device at 0.5 takes twice as long for every kernel
  /// (CpuDevice: docs/executor.md).
  std::map<DeviceId, double> relativeSpeed;
  /// Graphs of the module to bind besides main (gradient accumulation's
  /// "micro", passes/AccumulateGradients.h), run with run(graph, feeds).
  /// They share main's devices, variables, constants, collectives and arenas
  /// (one per device, as large as the largest graph's plan).
  std::vector<std::string> graphs;
  /// GPU devices: the physical GPU that runs logical device gpu:K
  /// (--emulate folds a plan's GPUs onto fewer); default: GPU K.
  std::function<int(DeviceId)> physicalGpu;
  /// Capture the second step as one CUDA graph and replay it afterwards,
  /// when every device is a GPU and nothing per-step is computed on the host
  /// (StepCapture.h, docs/cuda.md; cudaGraphNote() says why not).
  CudaGraphs cudaGraphs = CudaGraphs::Off;
  /// A batch that arrives on a host device only to be split and copied to
  /// GPUs (and tower outputs only copied back to be joined) is staged on a
  /// GPU instead (BatchStaging.h); off: where the plan put it.
  bool batchOnDevice = true;
  /// A multi-worker run: sums AllReduce groups marked `workers` across the
  /// workers (executor/dist/ over MPI). Unset: such a group is an error.
  CrossWorkerReducer *acrossWorkers = nullptr;
  /// The same for groups of GPUs: their NCCL communicator spans every GPU of
  /// every worker, its unique id carried by this exchange (executor/dist/).
  CrossWorkerExchange *gpuAcrossWorkers = nullptr;
};

} // namespace graphc
