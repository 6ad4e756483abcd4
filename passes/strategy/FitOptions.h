//===- FitOptions.h - The changes the fit advisor tries -------------*- C++ -*-===//
//
// The fit advisor (FitAdvisor.h) tries changes to a request whose plan does
// not fit. Each kind of change is one entry of fitOptions(): the request
// edits it proposes and how they are searched. Adding an option is adding
// an entry (a function that returns its edits, and a line in the list):
//
//   params          every other --params mode (data-parallel and
//                   parameter-server plans; not under --params auto, which
//                   tried them): each is compiled;
//   model-parallel  --strategy model-parallel (a data-parallel request of one
//                   process with two GPUs or more);
//   micro-batches   --strategy pipeline: more --micro-batches dividing each
//                   pipeline's share of the batch (1F1B holds at most S per
//                   stage); the fewest that fit;
//   accumulate      --accumulate K·A with --batch B/K (B the global batch, A
//                   the micro-batches already asked for, K dividing B): the
//                   same samples per update; the smallest K that fits;
//   gpus            more GPUs with the same global batch: --gpus N', or
//                   --workers W' for several workers, or a cluster file's
//                   GPUs repeated (when they are alike); the fewest that fit,
//                   up to kMoreDevicesFactor times as many;
//   batch           a smaller --batch: the largest that fits.
//
// An ordered entry's edits are ordered so that fitting is monotone along
// them (a smaller micro-batch, more devices, a smaller batch needs less
// memory on every device); the advisor searches them for the first that
// fits, starting where the device figures of the refused plan point
// (guess), and proves it first: the edit before it was compiled and does not
// fit. An unordered entry's edits are each compiled.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/CompileRequest.h"
#include "placement/analysis/MemoryNeeds.h"

#include <functional>
#include <string>
#include <vector>

namespace graphc {

/// How much an option changes the user's training: the first key of
/// "cheapest" (FitAdvisor.h).
enum class FitChange : unsigned char {
  SameTraining, ///< the same update on the same devices (mode, strategy, micro-batches)
  MoreDevices,  ///< the same update on more devices
  SmallerBatch, ///< a different update: fewer samples
};

/// What an entry sees: the refused request and what it asked for.
struct FitContext {
  const Module &forward;
  CompileRequest req;
  PlacementRequest place;
  Cluster cluster;         ///< the request's cluster (all workers' GPUs)
  int64_t batch = 0;       ///< the global batch of a step (or micro-step)
  bool batchGiven = true;  ///< false: the default per tower (the edits pin it)
  unsigned accumulate = 1; ///< micro-batches per update asked for
  const MemoryMisfit &misfit;
  unsigned gpus() const { return cluster.numGpus(); }
};

/// One change to the request, and how to say it.
struct RequestEdit {
  std::string flags; ///< "--batch 24 --accumulate 2"
  std::string what;  ///< "the same 48 samples per update in 2 micro-batches of 24"
  std::function<void(CompileRequest &, PlacementRequest &)> apply;
};

/// A kind's edits, made when asked for (a batch of a million has a million
/// smaller batches; a search compiles a few of them).
struct EditList {
  size_t size = 0;
  std::function<RequestEdit(size_t)> at;
};
/// The edits of a list made up front.
EditList editList(std::vector<RequestEdit> edits);

/// One kind of change: its edits (none: not applicable) and how to search
/// them.
struct FitOptionKind {
  const char *name;
  FitChange change;
  bool ordered; ///< monotone along the edits: the first that fits is searched for
  std::function<EditList(const FitContext &)> edits;
  /// Ordered: the index where the search starts (the refused plan's figures
  /// under a linear model of memory; only a start, every answer is compiled).
  std::function<size_t(const FitContext &, size_t size)> guess;
};

/// The list, in the order the advisor tries them (ties in predicted time go
/// to the earlier).
const std::vector<FitOptionKind> &fitOptions();

/// More devices are tried up to this many times the request's.
inline constexpr unsigned kMoreDevicesFactor = 4;

} // namespace graphc
