//===- StartWorkers.cpp ---------------------------------------------------===//

#include "executor/dist/StartWorkers.h"

#include "executor/dist/MpiWorkers.h"
#include "executor/dist/WorldOfOne.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/StringRef.h"

namespace graphc {

const char *LaunchedWorld::name() const {
  switch (launcher) {
  case Launcher::Mpirun:
    return "mpirun";
  case Launcher::Srun:
    return "srun";
  case Launcher::None:
    break;
  }
  return "no launcher";
}

const char *LaunchedWorld::sizeVariable() const {
  return launcher == Launcher::Srun ? "SLURM_NTASKS" : "OMPI_COMM_WORLD_SIZE";
}

llvm::Expected<LaunchedWorld> launchedWorld(EnvironmentLookup getenv) {
  LaunchedWorld world;
  if (getenv("OMPI_COMM_WORLD_SIZE"))
    world.launcher = Launcher::Mpirun;
  else if (getenv("SLURM_NTASKS") && getenv("SLURM_STEP_ID"))
    world.launcher = Launcher::Srun;
  else
    return world;
  const char *value = getenv(world.sizeVariable());
  unsigned size = 0;
  if (llvm::StringRef(value).getAsInteger(10, size) || size < 1)
    return makeError(std::string(world.sizeVariable()) + "='" + value + "' (set by " +
                     world.name() + "): expected a number of processes, at least 1");
  world.size = size;
  world.pmix = getenv("PMIX_RANK") != nullptr;
  return world;
}

llvm::Expected<std::unique_ptr<Workers>> startWorkers(const LaunchedWorld &launched) {
  if (!launched.startsMpi())
    return std::make_unique<WorldOfOne>();
  auto world = MpiWorkers::start();
  if (!world)
    return world.takeError();
  return std::unique_ptr<Workers>(std::move(*world));
}

} // namespace graphc
