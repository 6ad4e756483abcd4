//===- TrainingMode.h - Switch BatchNorm and Dropout to training -*- C++ -*-===//
//
// The `training-mode` pass. Guarantees, in graph "main":
//
//  1. Every BatchNorm with attribute training = 1 (unless --bn frozen) becomes
//     BatchNormTrain(x, scale, bias) -> (y, batch mean, biased batch variance)
//     under the BatchNorm's name (results `<name>:0..2`), keeping its
//     attributes but `training`. Its running statistics get moving-average
//     updates (ONNX momentum convention; PyTorch's 0.1 is 0.9 here):
//       Assign `<name>/update_mean` {var = running mean}:
//           momentum·running_mean + (1 − momentum)·batch_mean
//       Assign `<name>/update_var`  {var = running variance}:
//           momentum·running_var + (1 − momentum)·n/(n − 1)·batch_var
//     with n the elements per channel at the bound batch (unbiased, as
//     PyTorch). The weights are the Constants `<name>/momentum`,
//     `<name>/mean_weight` = 1 − momentum and `<name>/var_weight` =
//     (1 − momentum)·n/(n − 1); a pass that changes the per-device batch (tower
//     replication) rewrites var_weight. Running statistics must be read
//     through Variable nodes.
//  2. Frozen BatchNorm (training = 0, or --bn frozen) stays in inference form;
//     its scale and bias still get gradients (autodiff differentiates the
//     affine form).
//  3. Every Dropout becomes DropoutTrain {ratio, seed} -> (y, mask) under the
//     Dropout's name; y replaces the Dropout's result. `seed` is a per-node key
//     (a stable hash of the node's name and --dropout-seed-salt); the kernel
//     combines it with the run's seed, the tower and the step. Its other
//     attributes stay: `mask` (ir/DropoutMask.h) makes a per-sample mask
//     [N,1,...] for stochastic depth.
//  4. Module meta "training" = 1.
//
// New nodes keep the original node's tower and requested device; the graph is
// re-sorted topologically.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> applyTrainingMode(Module &m, const TrainingModeOptions &opts);

/// Signs in a forward model that it was exported for inference and so trains
/// as another model than the one its author wrote: BatchNorms in inference
/// form (training = 0: training keeps them frozen, rule 2), and convolutions
/// whose weights the exporter computed by folding a BatchNorm into them
/// (PyTorch's TorchScript exporter names such weights `onnx::Conv_<n>`; its
/// dynamo exporter keeps the module's names but says so in the node's
/// metadata, PlanInfo::exporterFolded), and Keras BatchNormalizations a
/// converter froze into constants (TensorFlow writes one as arithmetic in a
/// `<layer>/batchnorm/` scope, and its batch statistics, when traced in
/// training mode, in `<layer>/moments/`: tf2onnx keeps those names, also on
/// the convolutions it folded the arithmetic into). Dropout an exporter
/// removed leaves no sign; `dropouts` counts those that remain.
struct InferenceExportSigns {
  int64_t frozenBatchNorms = 0, foldedConvs = 0, convertedBatchNorms = 0, dropouts = 0;
  /// A node's name, a weight's name, a Keras layer's scope.
  std::string firstFrozen, firstFolded, firstConverted;
  bool any() const { return frozenBatchNorms > 0 || foldedConvs > 0 || convertedBatchNorms > 0; }
};

InferenceExportSigns inferenceExportSigns(const Module &forward);

} // namespace graphc
