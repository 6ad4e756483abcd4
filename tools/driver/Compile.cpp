#include "tools/driver/Compile.h"

#include "ir/Clone.h"
#include "ir/ShapeInference.h"
#include "ir/Verifier.h"

namespace graphc {

llvm::Expected<std::unique_ptr<Module>> compileTraining(const Module &forward,
                                                        const CompileRequest &req) {
  std::unique_ptr<Module> m = cloneModule(forward);
  PassManager pm(req.options, req.dump);
  if (auto e = pm.addPipeline(req.pipeline.empty() ? kDefaultTrainingPipeline : req.pipeline))
    return e;
  if (auto e = pm.run(*m))
    return e;
  return m;
}

llvm::Expected<std::unique_ptr<Module>> compileInference(const Module &forward, int64_t batch) {
  std::unique_ptr<Module> m = cloneModule(forward);
  if (batch > 0 && m->batch() != batch)
    if (auto e = bindBatch(*m, batch))
      return e;
  if (auto e = verify(*m))
    return e;
  return m;
}

} // namespace graphc
