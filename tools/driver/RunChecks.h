//===- RunChecks.h - Numbers a user can get wrong, refused up front --*- C++ -*-===//
//
// Every flag of `graphrun` that takes a number is checked here before any
// model is loaded, so a wrong one is one clear line and exit 1, never a
// silent default (`--steps 0` training 100 steps), a run that diverges with
// no word (`--lr -1`), or a failure deep in a library (`--threads 1000` in
// the OpenMP runtime). docs/reliability.md lists the cases and their tests.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>

namespace graphc {

class Module;
struct TrainOptions;

/// A number as a user would write it ("0.001", "-1", "1e+30").
std::string numberText(double v);

/// At most this many threads per core (--threads, --loader-threads).
inline constexpr int kMaxThreadsPerCore = 4;

/// A thread count from `flag`: at least `least`, at most kMaxThreadsPerCore
/// times this machine's cores. Not given (nullopt) is fine.
llvm::Error checkThreadCount(llvm::StringRef flag, std::optional<int64_t> threads, int least = 1);

/// The numbers of `graphrun train`: steps, epochs, learning rate, momentum,
/// weight decay, checkpoint cadence and count, loader threads, batch sizes.
llvm::Error checkTrainOptions(const TrainOptions &opts);

/// A plan compiled with --precision bf16 runs where its kernels are fast: on
/// CPU devices (emulated GPUs included; `deviceMap` is the executor's, unset:
/// devices run as named) of a CPU with bf16 instructions. Refused otherwise,
/// in one line, rather than running several times slower than f32. A plan
/// compiled with --precision fp16 must put its convolutions on GPUs (real, or
/// emulated on CPU devices, where f16 layers run through the f32 kernels).
llvm::Error checkPrecisionRuns(const Module &plan,
                               const std::function<std::string(const std::string &)> &deviceMap);

/// A note for a bf16 plan on a CPU with AMX, where oneDNN 2.6's bf16
/// convolutions ran slower than our fp32 ones (docs/performance.md); empty
/// otherwise.
std::string precisionNote(const Module &plan);

} // namespace graphc
