//===- Workers.cpp - The processes of a run, as the run sees them ---------===//

#include "executor/dist/Workers.h"

#include "executor/dist/MpiWorkers.h"
#include "executor/dist/WorldOfOne.h"
#include "ir/Diagnostics.h"

#include <cstdlib>

namespace graphc {

bool launchedByMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

llvm::Expected<std::unique_ptr<Workers>> startWorkers() {
  if (!launchedByMpirun())
    return std::make_unique<WorldOfOne>();
  auto world = MpiWorkers::start();
  if (!world)
    return world.takeError();
  return std::unique_ptr<Workers>(std::move(*world));
}

llvm::Error checkPsTasksFit(unsigned ps, unsigned processes) {
  if (ps < processes)
    return llvm::Error::success();
  return makeError("the run has " + llvm::Twine(processes) + " process" +
                   (processes == 1 ? "" : "es") + " and " + llvm::Twine(ps) + " ps task" +
                   (ps == 1 ? "" : "s") + ": no rank is left to train");
}

} // namespace graphc
