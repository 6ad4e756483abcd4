//===- Compile.h - Forward model to runnable module --------------*- C++ -*-===//
//
// The two compiles the tools run: training (the pass pipeline written down in
// passes/Passes.cpp, or --pipeline) and inference (bind the batch, verify).
// Both start from a copy, so one forward model can yield both.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

#include <memory>

namespace graphc {

struct CompileRequest {
  CompileOptions options;
  DumpOptions dump;
  std::string pipeline; ///< empty: kDefaultTrainingPipeline
};

llvm::Expected<std::unique_ptr<Module>> compileTraining(const Module &forward,
                                                        const CompileRequest &req);
llvm::Expected<std::unique_ptr<Module>> compileInference(const Module &forward, int64_t batch);

} // namespace graphc
