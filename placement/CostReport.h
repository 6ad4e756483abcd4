//===- CostReport.h - The cost model's table and its JSON form ---*- C++ -*-===//
//
// What `graphc inspect` prints of a PlacementCost (placement/analysis/
// CostModel.h): units chosen for reading (GFLOP per step, MiB, ms), and the
// same figures unscaled as JSON.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "placement/analysis/CostModel.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <optional>

namespace graphc {

/// Peak activation bytes of a device, from the memory plan
/// (placement/analysis/MemoryNeeds.h: plannedArenaBytes). nullopt or no
/// callback: not known, printed as "-".
using PeakActivationBytes = std::function<std::optional<int64_t>(llvm::StringRef device)>;

/// `graphc inspect`: a per-device table (nodes, GFLOP, variable and peak
/// activation MiB, MiB in and out per step, compute, comm and step ms), the
/// traffic between each pair of devices per step, and the predicted step
/// time with its bottleneck. Devices whose variables and activations exceed
/// their memory are flagged.
void printCostReport(const PlacementCost &cost, const Cluster &c, llvm::raw_ostream &os,
                     const PeakActivationBytes &peak = nullptr);
/// Prints rows of cells in columns: the first `leftColumns` aligned left
/// (names), the others right (numbers); rows[0] is the header.
void printTable(llvm::ArrayRef<std::vector<std::string>> rows, llvm::raw_ostream &os,
                unsigned leftColumns = 1);
/// Sharded optimizer state (--shard-optimizer): "optimizer slots sharded
/// over N devices: X MiB on each (Y MiB whole, which each device would hold
/// without sharding)"; empty when no variable of `m` is sharded.
std::string describeShardedSlots(const Module &m);
/// The same figures as JSON (bytes, FLOPs and seconds unscaled).
llvm::json::Value costReportJson(const PlacementCost &cost, const Cluster &c,
                                 const PeakActivationBytes &peak = nullptr);

} // namespace graphc
