//===- RunChecks.h - Numbers a user can get wrong, refused up front --*- C++ -*-===//
//
// Every flag of `graphc` and `graphrun` that takes a number is checked here,
// one rule in one place, before anything is allocated: so a wrong one is one
// clear line and exit 1, never a silent default (`--steps 0` training 100
// steps, `--num-classes 0` building 10), a run that diverges with no word
// (`--lr -1`), a failure deep in a library (`--threads 1000` in the OpenMP
// runtime) or an allocation that aborts (`--synthetic-samples 10^12`). Rules
// that need the model (synthetic classes against its outputs) run once it is
// loaded, before the data is opened. docs/input-limits.md lists every flag
// with its rule; the tools also refuse whole numbers CLI11 would wrap
// (tools/driver/CommandLine.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace graphc {

class Module;
struct ModelSpec;
struct PlacementRequest;
struct SyntheticData;
struct TrainOptions;

/// A number as a user would write it ("0.001", "-1", "1e+30").
std::string numberText(double v);

/// At most this many threads per core (--threads, --loader-threads).
inline constexpr int kMaxThreadsPerCore = 4;

/// A thread count from `flag`: at least `least`, at most kMaxThreadsPerCore
/// times this machine's cores. Not given (nullopt) is fine.
llvm::Error checkThreadCount(llvm::StringRef flag, std::optional<int64_t> threads, int least = 1);

/// `flag value: the MEANING must be at least LEAST`, unless unset.
llvm::Error checkAtLeast(llvm::StringRef flag, std::optional<int64_t> value, int64_t least,
                         llvm::StringRef meaning);

/// The flags of a built-in model as a command line gave them (unset: not
/// given, the model's own).
struct ModelFlags {
  std::optional<int64_t> numClasses, imageSize;
  std::optional<double> dropout;
  bool auxLogits = false;
};

/// Checks the model flags (--num-classes and --image-size at least 1,
/// --dropout in [0, 1), and all of them only with a built-in model: a model
/// file has its own) and sets them into `spec`. The model's own limits (an
/// image too small for its downsampling, dropout it does not have) are
/// checked as it is built.
llvm::Error applyModelFlags(const ModelFlags &flags, ModelSpec &spec);

/// The placement flags: --gpus not negative (its upper bound, 1023, is the
/// default cluster's: clusterFor), --workers at least 1, --ps and --towers
/// not negative.
llvm::Error checkPlacementFlags(const PlacementRequest &place);

/// --bucket-mb: a positive, finite number of megabytes.
llvm::Error checkBucketMb(double mb);

/// The synthetic data set against the model it feeds: --synthetic-samples at
/// least 1, and the set it asks for (samples times `sampleBytes`) within the
/// --memory-limit or the 1 TiB a tensor may take; --synthetic-classes 0
/// (every class) or from 1 to the model's `modelClasses`. Unset flags take
/// their defaults, which always fit.
llvm::Error checkSyntheticData(const SyntheticData &data, int64_t modelClasses,
                               int64_t sampleBytes);

/// The numbers of `graphrun train`: steps, epochs, learning rate, momentum,
/// weight decay, checkpoint cadence and count, loader threads, batch sizes,
/// placement.
llvm::Error checkTrainOptions(const TrainOptions &opts);

} // namespace graphc
