//===- ModelSource.h - Where a forward model comes from ----------*- C++ -*-===//
//
// Both tools accept a model as `--model NAME` (frontend/models) or as a file:
// ONNX, our text IR, a graphc module file, or a checkpoint (a file or a
// checkpoint directory), recognised by content. The result is always the
// single-device forward module the pass pipeline starts from.
//
// The batch (ModelSpec::batch, the global batch of --batch): an ONNX model
// keeps its symbolic batch unless its graph computes with it (arithmetic on
// the batch, splitting it), when the batch is bound at import; a model whose
// batch is bound to another size (exported with a fixed batch, a checkpoint of
// one bound at import) is rebatched where its graph allows it
// (passes/Rebatch.h), or refused in one line: for a model file, how to export
// it with a dynamic batch axis; for a checkpoint, to run it at the batch it
// holds (its import may have bound it, so export advice would not help).
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
  int64_t batch = 0; ///< the global batch it will run at (0: the model's own)
  /// A model exported with a fixed batch keeps it (no --batch was given);
  /// `batch` still binds a symbolic one at import where the graph needs it.
  bool keepFixedBatch = false;
};

struct LoadedModel {
  std::unique_ptr<Module> forward;
  /// Set when the model came from a checkpoint: its step and the tensors.
  bool fromCheckpoint = false;
  uint64_t checkpointStep = 0;
  uint64_t checkpointSeed = 0; ///< the seed of the run that wrote it
  std::string checkpointData;  ///< its run's data set (TrainingData.h's dataIdentity)
  /// Set when the model was rebatched from its own fixed batch: it says so,
  /// for the run plan.
  std::string batchNote;
};

llvm::Expected<LoadedModel> loadModel(const ModelSpec &spec);
/// A model loaded at its own batch, rebatched to `spec.batch` as loadModel
/// would have (for a batch known only once the model was read).
llvm::Error rebatchTo(LoadedModel &model, const ModelSpec &spec);

/// The model's data input (its first graph input) and its type.
llvm::Expected<const Node *> dataInput(const Module &forward);

} // namespace graphc
