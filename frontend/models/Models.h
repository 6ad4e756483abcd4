//===- Models.h - The built-in model registry --------------------*- C++ -*-===//
//
// `graphc --model NAME` builds one of these single-device forward graphs:
//
//   inception_v3     torchvision 0.14 Inception3 (transform_input=False)
//   resnet18/50      torchvision ResNet
//   small_cnn        a two-conv BatchNorm CNN for 28×28 grey images
//   small_cnn_nobn   the same without BatchNorm
//   mlp              784 → 256 → 256 → 10 with ReLU
//
// Every model verifies, keeps the batch dimension symbolic unless
// ModelOptions::batch binds it, names its variables as PyTorch's state_dict
// does, and returns its logits as graph output 0 (inception_v3 with the aux
// head: aux logits as output 1). docs/models.md describes each topology.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/models/ModelOptions.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace graphc::models {

struct ModelInfo {
  llvm::StringRef name;
  llvm::StringRef description;
};

/// Every registered model, in a fixed order.
llvm::ArrayRef<ModelInfo> listModels();

/// Builds model `name`; an unknown name or options the model cannot take (an
/// image too small for its downsampling, say) are an error that says why, and
/// for an unknown name lists the models there are.
llvm::Expected<std::unique_ptr<Module>> buildModel(llvm::StringRef name,
                                                   const ModelOptions &opts = {});

} // namespace graphc::models
