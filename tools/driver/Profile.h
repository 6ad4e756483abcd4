//===- Profile.h - Where the time of a step went -----------------*- C++ -*-===//
//
// Turns the executor's per-node timings into a per-op table (time, share,
// count, the slowest nodes), followed by the step breakdown: all of the
// step's wall time in parts, per device and for the whole step
// (StepBreakdownTable.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"

#include "llvm/Support/raw_ostream.h"

namespace graphc {

/// Per-op time table, slowest op first, then the 15 slowest nodes, the
/// implementations and the step breakdown with its kernels per op type.
void printProfile(const Executor &ex, llvm::raw_ostream &os);
/// Per op, the library implementations its kernels ran (oneDNN's names:
/// "convolution jit_wino_4x3:avx512_core") and on how many nodes; layout
/// copies (reorders) are the per-op table's.
void printImplementations(const Executor &ex, llvm::raw_ostream &os);
llvm::Error writeProfile(const Executor &ex, llvm::StringRef path);

} // namespace graphc
