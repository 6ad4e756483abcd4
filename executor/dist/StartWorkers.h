//===- StartWorkers.h - The world of this process ------------------*- C++ -*-===//
//
// Which Workers a process runs in: MPI's when mpirun started it, otherwise a
// world of one. The one place that knows both implementations.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/Workers.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace graphc {

/// True when Open MPI's mpirun launched this process.
bool launchedByMpirun();

/// The world of this process: MPI's when mpirun launched it (started here,
/// once per process), otherwise a world of one that never loads MPI.
llvm::Expected<std::unique_ptr<Workers>> startWorkers();

} // namespace graphc
