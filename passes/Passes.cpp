//===- Passes.cpp - The built-in passes and the default pipelines -----------===//

#include "passes/AddLoss.h"
#include "passes/AddOptimizer.h"
#include "passes/BasicPasses.h"
#include "passes/InsertTransfers.h"
#include "passes/PlaceDevices.h"
#include "passes/TrainingMode.h"
#include "passes/autodiff/Autodiff.h"

namespace graphc {

const char *const kDefaultInferencePipeline = "bind-batch,verify";
const char *const kDefaultTrainingPipeline =
    "bind-batch,training-mode,add-loss,autodiff,add-optimizer,dce,verify";

static void addFunctionPass(PassRegistry &r, llvm::StringRef name, llvm::StringRef summary,
                            FunctionPass::Fn fn) {
  r.add(name, summary, [name = name.str(), fn](const CompileOptions &o) {
    return std::make_unique<FunctionPass>(name, fn, o);
  });
}

void registerBuiltinPasses(PassRegistry &r) {
  registerBasicPasses(r);
  addFunctionPass(r, "training-mode",
                  "BatchNorm to BatchNormTrain with moving averages, Dropout to DropoutTrain",
                  applyTrainingMode);
  addFunctionPass(r, "add-loss", "softmax cross-entropy on the logits (mean over the batch)",
                  addLoss);
  addFunctionPass(r, "autodiff", "gradients of the loss for every trainable variable",
                  differentiate);
  addFunctionPass(r, "add-optimizer", "an lr input, optimizer slots and one update per parameter",
                  addOptimizer);
  addFunctionPass(r, "place-devices",
                  "assign every node a device (the placer in CompileOptions::placer)",
                  placeDevices);
  addFunctionPass(r, "insert-transfers",
                  "one Transfer per value and destination device on every crossing edge",
                  insertTransfers);
}

} // namespace graphc
