//===- Passes.cpp - The built-in passes and the default pipelines -----------===//

#include "passes/BasicPasses.h"

namespace graphc {

const char *const kDefaultInferencePipeline = "bind-batch,verify";
const char *const kDefaultTrainingPipeline = "bind-batch,verify";

void registerBuiltinPasses(PassRegistry &r) { registerBasicPasses(r); }

} // namespace graphc
