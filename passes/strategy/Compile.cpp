#include "passes/strategy/Compile.h"

#include "ir/Clone.h"
#include "placement/DotView.h"

namespace graphc {

llvm::Error runPipelines(Module &m, const CompileOptions &options, const DumpOptions &dump,
                         llvm::ArrayRef<llvm::StringRef> pipelines) {
  PassManager pm(options, dump);
  pm.setDotWriter(writeDot);
  for (llvm::StringRef pipeline : pipelines)
    if (auto e = pm.addPipeline(pipeline))
      return e;
  return pm.run(m);
}

llvm::StringRef trainingPipeline(const CompileRequest &req) {
  return req.pipeline.empty() ? llvm::StringRef(kDefaultTrainingPipeline) : req.pipeline;
}

void keepForwardGraph(const Module &forward, Module &compiled) {
  Graph &g = compiled.addGraph("forward");
  g.setOutputs(cloneGraphInto(*forward.findGraph("main"), g));
}

llvm::Expected<std::unique_ptr<Module>> compileTraining(const Module &forward,
                                                        const CompileRequest &req) {
  std::unique_ptr<Module> m = cloneModule(forward);
  if (auto e = runPipelines(*m, req.options, req.dump, {trainingPipeline(req)}))
    return e;
  keepForwardGraph(forward, *m);
  return m;
}

llvm::Expected<std::unique_ptr<Module>> compileInference(const Module &forward, int64_t batch) {
  std::unique_ptr<Module> m = cloneModule(forward);
  CompileOptions options;
  options.batch = std::max<int64_t>(0, batch);
  if (auto e = runPipelines(*m, options, DumpOptions(), {kDefaultInferencePipeline}))
    return e;
  return m;
}

} // namespace graphc
