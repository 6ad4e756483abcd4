//===- Calibrate.h - Measured device and link figures for a cluster -*- C++ -*-===//
//
// `graphrun calibrate --cluster FILE [--emulate]` measures what the cost model
// and the simulator otherwise take from defaults, and writes it into the
// cluster file (crash-safely: a temporary file renamed over it):
//
//   kernels   a calibration workload (by default resnet18 at 64x64, batch 8
//             per device, momentum: convolutions, matrix products, batch
//             norms, pools, elementwise; --model, --image-size and
//             --per-device choose another) trains a few steps on the host
//             alone (the cpu kind, every core) and, for the gpu kind, data
//             parallel: with --emulate over as many emulated GPUs as the
//             cores hold, each with the threads one of the cluster's N gets
//             (cores / N), recorded as `threads` and `cores` (the simulator
//             adds their turns at the cores); without, over the machine's
//             GPUs (the cluster's gpu:K is physical GPU K). From each node's
//             kernel time over the steps after the first (transfers and
//             collectives apart): the launch time (the median of the kernels
//             that do next to no work, plus the executor's own time per node:
//             the host run's step less its kernels, per node) and, per op
//             class, work per second after the launches (convolutions and
//             matrix products in FLOP/s, the rest in bytes/s);
//             calibration.{cpu,gpu}.
//   model     the model of GPU the figures are for (calibration.gpu.model,
//             what `--gpus N --gpu-model` finds them by: CalibratedGpu.h):
//             --gpu-model NAME, else the physical GPUs' (when they are all one
//             model; with --emulate, none). Without --emulate each GPU's
//             memory is the physical GPU's.
//   links     with --emulate, a copy between devices is a copy in this
//             machine's memory: every link gets the measured bandwidth of a
//             64 MiB memcpy; without, each link is timed both ways with 64
//             MiB copies (copyBandwidth) and the slower kept.
//
// The physical-GPU path compiles and is host-tested only: it has not run on
// a GPU (unproven).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace graphc {

struct CalibrateRequest {
  std::string clusterFile;
  std::string output; ///< empty: rewrite clusterFile
  bool emulate = false;
  std::string gpuModel; ///< --gpu-model: the model recorded; empty: the physical GPUs'
  int threads = 0;      ///< 0: every core
  int64_t steps = 4;
  /// The calibration workload: a built-in model, its image size and the
  /// images per device (a workload like the one to be predicted calibrates
  /// its op classes' rates closer).
  std::string model = "resnet18";
  int64_t imageSize = 64, perDevice = 8;
};

/// Measures, writes the file, prints what it measured to `log`; returns the
/// calibrated cluster.
llvm::Expected<Cluster> calibrateCluster(const CalibrateRequest &req, llvm::raw_ostream &log);

/// Fits a kind's figures from kernel timings (exposed for tests): the launch
/// is the median time of the near-empty kernels plus `outsideKernels`, the
/// executor's own time per node around a kernel.
struct KernelTiming;
KindCalibration fitCalibration(llvm::ArrayRef<KernelTiming> kernels, llvm::StringRef measured,
                               double outsideKernels = 0);

} // namespace graphc
