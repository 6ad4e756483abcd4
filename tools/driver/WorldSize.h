//===- WorldSize.h - A run's processes against its launcher's -----*- C++ -*-===//
//
// The training workers of `graphrun train` come from --workers, from tasks
// (--tasks, TF_CONFIG's cluster) or, with neither, from the launcher that
// started the process (mpirun's OMPI_COMM_WORLD_SIZE, srun's SLURM_NTASKS:
// executor/dist/StartWorkers.h), as torchrun and Horovod take theirs, less the
// ps tasks (TaskFlags::workersFrom). Whatever gave them, the plan's processes
// must be the world's; checkWorldSize says so in one line naming both numbers
// and where each came from.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/StartWorkers.h"

#include "llvm/Support/Error.h"

namespace graphc {

/// What gave a run its training workers, for messages and for plans that
/// record their own (--workers on a compiled plan is refused, a default from
/// the launcher is not).
enum class WorkersSource {
  Default,  ///< one worker: no flag, no tasks, no launcher
  Flag,     ///< --workers W
  Tasks,    ///< --tasks FILE or TF_CONFIG
  Launcher, ///< the launcher's world less the ps tasks
};

/// The plan's `planned` workers and `ps` tasks against the processes the
/// launcher started (`launched`) and MPI joined (`worldSize`; 1 in a world of
/// one). `source` says what gave the workers, for the message.
llvm::Error checkWorldSize(unsigned planned, unsigned ps, WorkersSource source,
                           const LaunchedWorld &launched, unsigned worldSize);

} // namespace graphc
