//===- Compile.h - A forward model through pass pipelines --------*- C++ -*-===//
//
// The compiles every strategy (CompileStrategy.h) is made of:
//   training   the training pipeline (kDefaultTrainingPipeline, or
//              --pipeline) on a copy of the forward model, which the result
//              keeps as graph "forward", so evaluation and checkpoints need
//              nothing else;
//   inference  kDefaultInferencePipeline: the batch bound, the inference
//              fusions (passes/InferenceFusion.h), verified.
// A pipeline is a list of registered pass names run by one pass manager;
// several pipelines are added to it one after another, never joined into
// one string, so --dump-dir, --print-ir-after, --time-passes and the
// verifier see every pass of a compile. All start from a copy, so one
// forward model can yield several.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/CompileRequest.h"

#include <memory>

namespace graphc {

/// Runs the registered pipelines `pipelines`, in order, on `m` through one
/// pass manager with `options` and `dump` (DOT dumps coloured by device).
llvm::Error runPipelines(Module &m, const CompileOptions &options, const DumpOptions &dump,
                         llvm::ArrayRef<llvm::StringRef> pipelines);
/// --pipeline, or kDefaultTrainingPipeline.
llvm::StringRef trainingPipeline(const CompileRequest &req);
/// Adds `forward`'s main graph to `compiled` as graph "forward".
void keepForwardGraph(const Module &forward, Module &compiled);

/// The training pipeline on a copy of `forward`, which it keeps.
llvm::Expected<std::unique_ptr<Module>> compileTraining(const Module &forward,
                                                        const CompileRequest &req);
/// kDefaultInferencePipeline on a copy of `forward` bound to `batch` (0:
/// the model's own), for CPU devices (evaluation, infer).
llvm::Expected<std::unique_ptr<Module>> compileInference(const Module &forward, int64_t batch);

} // namespace graphc
