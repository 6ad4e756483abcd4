//===- ModelSource.h - Where a forward model comes from ----------*- C++ -*-===//
//
// Both tools accept a model as `--model NAME` (frontend/models) or as a file:
// ONNX, our text IR, a graphc module file, or a checkpoint (a file or a
// checkpoint directory), recognised by content. The result is always the
// single-device forward module the pass pipeline starts from.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/models/Models.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace graphc {

struct ModelSpec {
  std::string path; ///< a model or checkpoint file or directory
  std::string name; ///< a built-in model, when no path is given
  models::ModelOptions options;
  uint64_t seed = 0;
};

struct LoadedModel {
  std::unique_ptr<Module> forward;
  /// Set when the model came from a checkpoint: its step and the tensors.
  bool fromCheckpoint = false;
  uint64_t checkpointStep = 0;
  uint64_t checkpointSeed = 0; ///< the seed of the run that wrote it
};

llvm::Expected<LoadedModel> loadModel(const ModelSpec &spec);

/// The model's data input (its first graph input) and its type.
llvm::Expected<const Node *> dataInput(const Module &forward);

} // namespace graphc
