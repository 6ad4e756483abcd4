//===- WorldSize.cpp ------------------------------------------------------===//

#include "tools/driver/WorldSize.h"

#include "ir/Diagnostics.h"

#include <string>

namespace graphc {

namespace {

/// "1 worker", "2 workers"; "1 process", "2 processes".
std::string count(unsigned n, llvm::StringRef one, llvm::StringRef many) {
  return std::to_string(n) + " " + (n == 1 ? one : many).str();
}

} // namespace

llvm::Error checkWorldSize(unsigned planned, unsigned ps, WorkersSource source,
                           const LaunchedWorld &launched, unsigned worldSize) {
  if (launched.launcher != Launcher::None && launched.size != worldSize)
    return makeError(std::string(launched.name()) + " started " +
                     count(launched.size, "process", "processes") + " (" + launched.sizeVariable() +
                     "), but MPI joined " + std::to_string(worldSize) +
                     (launched.launcher == Launcher::Srun
                          ? ": srun's tasks form one MPI world only with PMIx (srun --mpi=pmix); "
                            "or run mpirun inside the allocation"
                          : ""));
  const unsigned processes = planned + ps;
  if (processes == worldSize)
    return llvm::Error::success();
  std::string plan = "the plan is for " + count(planned, "worker", "workers");
  if (source == WorkersSource::Flag)
    plan += " (--workers " + std::to_string(planned) + ")";
  if (ps)
    plan += " and " + count(ps, "ps task", "ps tasks") + " (" + std::to_string(processes) +
            " processes)";
  if (launched.launcher == Launcher::None)
    return makeError(plan + ", but this process was not started by mpirun: run it as `mpirun -np " +
                     std::to_string(processes) + " graphrun train ...`");
  std::string fix = launched.launcher == Launcher::Mpirun
                        ? "pass `mpirun -np " + std::to_string(processes) + "`"
                        : "pass `srun --ntasks " + std::to_string(processes) + "`";
  if (source == WorkersSource::Flag && worldSize > ps)
    fix += ", or leave --workers out to train on " + std::to_string(worldSize - ps);
  return makeError(plan + ", but " + launched.name() + " started " +
                   count(worldSize, "process", "processes") + ": " + fix);
}

} // namespace graphc
