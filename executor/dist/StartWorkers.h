//===- StartWorkers.h - The world of this process ------------------*- C++ -*-===//
//
// Which Workers a process runs in: MPI's when a launcher started it with its
// peers (mpirun, or Slurm's srun with PMIx), otherwise a world of one. The
// one place that knows both implementations, and what each launcher tells its
// processes about their world.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/dist/Workers.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace graphc {

enum class Launcher {
  None,   ///< started alone (by hand, or a batch script's own process)
  Mpirun, ///< Open MPI's mpirun: OMPI_COMM_WORLD_SIZE
  Srun,   ///< a task of a Slurm job step: SLURM_NTASKS (with SLURM_STEP_ID)
};

/// The processes a launcher started together, as it tells each of them.
struct LaunchedWorld {
  Launcher launcher = Launcher::None;
  unsigned size = 1;
  /// srun only: PMIx (srun --mpi=pmix) lets MPI join the tasks into one world.
  bool pmix = false;
  /// "mpirun", "srun": for messages.
  const char *name() const;
  /// The variable the size came from: "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS".
  const char *sizeVariable() const;
  /// Whether MPI starts this process's world.
  bool startsMpi() const {
    return launcher == Launcher::Mpirun || (launcher == Launcher::Srun && pmix);
  }
};

/// Reads an environment variable (std::getenv, or a test's table).
using EnvironmentLookup = llvm::function_ref<const char *(const char *)>;

/// What the launcher told this process: mpirun's OMPI_COMM_WORLD_SIZE first
/// (mpirun inside a Slurm allocation starts its daemons with srun, whose
/// variables the ranks inherit), then SLURM_NTASKS where SLURM_STEP_ID says
/// that srun started the process (a batch script's own process has
/// SLURM_NTASKS too, but no peers). A size that is not a whole number of at
/// least 1 is an error naming the variable.
llvm::Expected<LaunchedWorld> launchedWorld(EnvironmentLookup getenv);

/// The world of this process: MPI's when `launched` says so (started here,
/// once per process), otherwise a world of one that never loads MPI.
llvm::Expected<std::unique_ptr<Workers>> startWorkers(const LaunchedWorld &launched);

} // namespace graphc
