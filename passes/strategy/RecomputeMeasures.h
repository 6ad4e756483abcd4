//===- RecomputeMeasures.h - The recompute pass's measures, from placement -*- C++ -*-===//
//
// The recompute pass (passes/Recompute.h) decides by the memory plan the
// placement checks use (placement/analysis/MemoryNeeds.h) and by the
// step-time model (placement/analysis/StepTimeModel.h), which passes may not
// include; a placed compile hands them in through its options, as it does
// the placer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"
#include "passes/CompileOptions.h"

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace graphc {

/// Sets `options.recompute`'s measures for plans on `cluster`.
void setRecomputeMeasures(CompileOptions &options, const Cluster &cluster);
/// The pipeline that runs the pass after placement: none when --recompute
/// is off, so that such a compile runs the passes it always has.
std::vector<llvm::StringRef> recomputePipelines(const CompileOptions &options);

/// What the recomputed copies (passes/Recompute.h) cost one device of a
/// placed plan per step, against all of its nodes: FLOPs (ir/Cost.h) and
/// kernel seconds (the step-time model's, as the simulator times them).
struct DeviceRecompute {
  std::string device;
  unsigned nodes = 0;
  int64_t flops = 0, deviceFlops = 0;
  double seconds = 0, deviceSeconds = 0;
};
/// The devices of `placed`'s graph main that run copies, in name order
/// (none for a plan without them); its cluster (meta) times them.
std::vector<DeviceRecompute> recomputeByDevice(const Module &placed);
/// The names of the nodes the copies recompute, in graph order.
std::vector<std::string> recomputedNodes(const Module &placed);

} // namespace graphc
