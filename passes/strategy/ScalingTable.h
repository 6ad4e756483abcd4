//===- ScalingTable.h - Predicted data-parallel scaling to many GPUs -*- C++ -*-===//
//
// `graphc simulate --model NAME --gpus 1,2,4,...,1024 --workers-of 8`: for
// each GPU count N, the data-parallel plan of one worker (g = min(N, 8) GPUs,
// one tower each, --params as given, a fixed batch per GPU) is compiled for
// the worker's GPUs (DataParallelStrategy.h) and simulated
// (placement/analysis/StepSimulator.h) with W = N / g workers, every
// all-reduce also crossing the workers hierarchically at the network's
// bandwidth. Weak scaling: images/s = N x batch per GPU / step, speed-up over
// one GPU, efficiency = speed-up / N. One compile per distinct g, so 1024
// GPUs cost no more than 8.
//
// The published figures printed beside it are other hardware (P100s, 25 GbE),
// for orientation: the model and the network figures are what to compare.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/CompileRequest.h"
#include "placement/analysis/StepSimulator.h"

namespace graphc {

struct ScalingRequest {
  std::vector<unsigned> gpus; ///< GPU counts, in the order printed
  unsigned workersOf = 8;     ///< GPUs per worker (machine)
  /// --cluster: one worker's machine (e.g. calibrated): its GPUs are
  /// workersOf, a row with fewer uses its first ones; empty: the default
  /// (H100-like) cluster of workersOf GPUs.
  std::string clusterFile;
  /// Or workersOf copies of this calibrated file's GPU (PlacementRequest::
  /// calibratedFile).
  std::string calibratedFile;
  int64_t batchPerGpu = 32;
  SimOptions sim; ///< network bandwidth and latency per worker
};

struct ScalingRow {
  unsigned gpus = 0, workers = 0, perWorker = 0;
  double stepSeconds = 0, imagesPerSecond = 0, speedup = 0, efficiency = 0;
  double allReduceOnPath = 0; ///< seconds of the critical path in all-reduces
};

/// `req` carries the tower modes (--params, --bn, optimizer); its batch and
/// towers are set per row. Errors: a GPU count that is not a multiple of
/// --workers-of above it, --workers-of below 2 with more GPUs than it.
llvm::Expected<std::vector<ScalingRow>>
scalingTable(const Module &forward, const CompileRequest &req, const ScalingRequest &scaling);

} // namespace graphc
