//===- Profile.h - Where the time of a step went -----------------*- C++ -*-===//
//
// Turns the executor's per-node timings into a per-op table (time, share,
// count, the slowest nodes) and the trace's per-device breakdown into compute,
// communication, input and waiting time per step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"

#include "llvm/Support/raw_ostream.h"

namespace graphc {

/// Per-op time table, slowest op first, then the 15 slowest nodes and the
/// implementations.
void printProfile(const Executor &ex, llvm::raw_ostream &os);
/// Per op, the library implementations its kernels ran (oneDNN's names:
/// "convolution jit_wino_4x3:avx512_core") and on how many nodes; layout
/// copies (reorders) are the per-op table's.
void printImplementations(const Executor &ex, llvm::raw_ostream &os);
llvm::Error writeProfile(const Executor &ex, llvm::StringRef path);
/// One line per device: compute / communication / input / wait / idle per step.
void printTimeBreakdown(const TraceRecorder &trace, llvm::raw_ostream &os);

} // namespace graphc
