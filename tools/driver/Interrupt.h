//===- Interrupt.h - SIGINT and SIGTERM stop a run cleanly -------*- C++ -*-===//
//
// `graphrun train` installs these handlers. The first SIGINT or SIGTERM
// records its number (the training loop finishes its step, writes a
// checkpoint and stops; the tool then exits with 128 + the number, 130 or
// 143, as a shell reports a process the signal ended) and says so on
// stderr; a second one exits at once with the same code. (SIGXFSZ is
// ignored by both tools from the start: ir/OutputFile.h.)
//
//===----------------------------------------------------------------------===//
#pragma once

#include <atomic>

namespace graphc {

/// Installs the handlers (once per process) and returns the flag they set.
const std::atomic<int> &installStopHandlers();

} // namespace graphc
