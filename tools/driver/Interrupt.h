//===- Interrupt.h - SIGINT and SIGTERM stop a run cleanly -------*- C++ -*-===//
//
// The first SIGINT or SIGTERM records its number (the training loop
// finishes its step, writes a checkpoint and stops; the tool then exits with
// 128 + the number, 130 or 143, as a shell reports a process the signal
// ended) and says so on stderr; a second one exits at once with the same
// code. (SIGXFSZ is ignored by both tools from the start: ir/OutputFile.h.)
// The flags also say whether the parent process (mpirun or its daemon, which
// sends SIGTERM when it ends the job) sent the first one:
// executor/dist/StopFlags.h.
//
// Where the signals are taken matters. oneDNN's JIT GEMM kernels point the
// stack register into a heap buffer while they run (oneDNN issue #4845), so
// a handler run on a thread inside one has its signal frame written over the
// heap: glibc then aborts at a later free(). A process that runs kernels
// (`graphrun train`) therefore blocks both signals in every thread and takes
// them on one thread of its own that does nothing else (watchStopSignals).
// `graphrun launch` runs no kernel and starts mpirun, which inherits the
// signal mask: it keeps plain handlers (installStopHandlers).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/StopFlags.h"

namespace graphc {

/// Blocks SIGINT and SIGTERM in the calling thread, and so in every thread
/// started after it, and starts the thread "graphrun-stop" that waits for
/// them (once per process). Call it before the process starts any other
/// thread: one started earlier could still take a signal.
const StopFlags &watchStopSignals();

/// Installs handlers that run on whichever thread the signal reaches (once
/// per process), for a process that runs no kernel.
const StopFlags &installStopHandlers();

} // namespace graphc
