//===- StartWorkers.cpp ---------------------------------------------------===//

#include "executor/dist/StartWorkers.h"

#include "executor/dist/MpiWorkers.h"
#include "executor/dist/WorldOfOne.h"

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

} // namespace graphc
