//===- Interrupt.h - SIGINT and SIGTERM stop a run cleanly -------*- C++ -*-===//
//
// `graphrun train` installs these handlers. The first SIGINT or SIGTERM
// records its number (the training loop finishes its step, writes a
// checkpoint and stops; the tool then exits with 128 + the number, 130 or
// 143, as a shell reports a process the signal ended) and says so on
// stderr; a second one exits at once with the same code. (SIGXFSZ is
// ignored by both tools from the start: ir/OutputFile.h.) The flags also
// say whether the parent process (mpirun or its daemon, which sends SIGTERM
// when it ends the job) sent the first one: executor/dist/StopFlags.h.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/StopFlags.h"

namespace graphc {

/// Installs the handlers (once per process) and returns the flags they set.
const StopFlags &installStopHandlers();

} // namespace graphc
