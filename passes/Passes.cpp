//===- Passes.cpp - The built-in passes and the default pipelines -----------===//

#include "passes/AccumulateGradients.h"
#include "passes/AddLoss.h"
#include "passes/AddOptimizer.h"
#include "passes/AggregateGradients.h"
#include "passes/BasicPasses.h"
#include "passes/FuseBatchNormRelu.h"
#include "passes/InferenceFusion.h"
#include "passes/InsertTransfers.h"
#include "passes/LossScaling.h"
#include "passes/MixedPrecision.h"
#include "passes/PipelineStages.h"
#include "passes/PlaceDevices.h"
#include "passes/PsPart.h"
#include "passes/Recompute.h"
#include "passes/SplitBatch.h"
#include "passes/TowerReplication.h"
#include "passes/TrainingMode.h"
#include "passes/autodiff/Autodiff.h"

namespace graphc {

const char *const kDefaultInferencePipeline =
    "bind-batch,fuse-conv-add,fuse-conv-relu,fuse-bn-relu,fuse-pad-pool,verify";
const char *const kDefaultTrainingPipeline =
    "bind-batch,training-mode,add-loss,mixed-precision,autodiff,add-optimizer,replicate-towers,"
    "split-batch,concat-outputs,accumulate-gradients,aggregate-gradients,loss-scaling,fuse-bn-relu,"
    "dce,verify";
const char *const kPlacementPipeline = "place-devices,insert-transfers,verify";

/// A pass that reads nothing but the module.
static void addFunctionPass(PassRegistry &r, llvm::StringRef name, llvm::StringRef summary,
                            llvm::Expected<bool> (*fn)(Module &)) {
  r.add(name, summary, [name = name.str(), fn](const CompileOptions &) {
    return std::make_unique<FunctionPass>(name, fn);
  });
}

/// A pass with options of its own: `own` takes them from the compile's.
template <typename Options>
static void addFunctionPass(PassRegistry &r, llvm::StringRef name, llvm::StringRef summary,
                            llvm::Expected<bool> (*fn)(Module &, const Options &),
                            Options (*own)(const CompileOptions &)) {
  r.add(name, summary, [name = name.str(), fn, own](const CompileOptions &o) {
    return std::make_unique<FunctionPass>(name,
                                          [fn, opts = own(o)](Module &m) { return fn(m, opts); });
  });
}

void registerBuiltinPasses(PassRegistry &r) {
  registerBasicPasses(r);
  addFunctionPass(r, "training-mode",
                  "BatchNorm to BatchNormTrain with moving averages, Dropout to DropoutTrain",
                  applyTrainingMode, trainingModeOptions);
  addFunctionPass(r, "add-loss", "softmax cross-entropy on the logits (mean over the batch)",
                  addLoss, lossOptions);
  addFunctionPass(r, "mixed-precision",
                  "--precision bf16: convolutions and what follows them in bf16, f32 weights",
                  applyMixedPrecision, precisionOptions);
  addFunctionPass(r, "autodiff", "gradients of the loss for every trainable variable",
                  differentiate);
  addFunctionPass(r, "add-optimizer", "an lr input, optimizer slots and one update per parameter",
                  addOptimizer, optimizerOptions);
  addFunctionPass(r, "replicate-towers",
                  "one copy of the graph per tower (--towers), shared variables, per-tower batch",
                  replicateTowers, towerOptions);
  addFunctionPass(r, "split-batch", "one global input per data input, split over the towers",
                  splitBatch);
  addFunctionPass(r, "concat-outputs",
                  "tower outputs joined on the host: losses summed, batches concatenated",
                  concatOutputs);
  addFunctionPass(r, "accumulate-gradients",
                  "--accumulate K: a graph 'micro' that adds each tower's gradients into "
                  "accumulators, main adds the last micro-batch's and updates",
                  accumulateGradients, accumulateOptions);
  addFunctionPass(r, "aggregate-gradients",
                  "variable storage by --params and the towers' sums or all-reduce buckets",
                  aggregateGradients, aggregateOptions);
  addFunctionPass(r, "pipeline-stages",
                  "--strategy pipeline: the towers' micro-batches through stages on their "
                  "devices, per-stage sums (all-reduced between pipelines), the schedule's order",
                  pipelineStages, pipelineOptions);
  addFunctionPass(r, "loss-scaling",
                  "dynamic loss scaling (--loss-scale; fp16): scaled loss gradient, checked "
                  "updates",
                  addLossScaling, lossScaleOptions);
  addFunctionPass(r, "fuse-bn-relu",
                  "a batch norm read only by a ReLU computes the ReLU itself (after autodiff); "
                  "on GPU plans its gradient applies the ReLU's mask too",
                  fuseBatchNormReluPass, batchNormReluOptions);
  // The inference fusions (InferenceFusion.h), in kDefaultInferencePipeline's
  // order: a residual Add joins its Conv before the Relu after it does.
  addFunctionPass(
      r, "fuse-conv-add", "a residual Add of a Conv's result becomes the Conv's addend (inference)",
      +[](Module &m) -> llvm::Expected<bool> { return fuseConvAdd(m) > 0; });
  addFunctionPass(
      r, "fuse-conv-relu", "a Conv read only by a ReLU computes the ReLU itself (inference)",
      +[](Module &m) -> llvm::Expected<bool> { return fuseConvRelu(m) > 0; });
  addFunctionPass(
      r, "fuse-pad-pool",
      "a zero Pad read only by an AveragePool becomes the pool's own padding (inference)",
      +[](Module &m) -> llvm::Expected<bool> { return fusePadIntoAveragePool(m) > 0; });
  addFunctionPass(r, "place-devices",
                  "assign every node a device (the placer in CompileOptions::placer)", placeDevices,
                  placerOptions);
  addFunctionPass(r, "insert-transfers",
                  "one Transfer per value and destination device on every crossing edge",
                  insertTransfers);
  addFunctionPass(r, "recompute",
                  "--recompute auto: where a placed plan does not fit its devices' memory, drop "
                  "activations and recompute them before the backward pass reads them",
                  recompute, recomputeOptions);
  addFunctionPass(
      r, "shard-over-ps",
      "--ps P: the updated variables and their slots sharded over P parameter-server tasks "
      "by bytes (recorded in the plan)",
      +[](Module &m, const PsOptions &o) -> llvm::Expected<bool> {
        if (auto e = shardOverPs(m, o.tasks, o.async))
          return e;
        return true;
      },
      psOptions);
}

} // namespace graphc
