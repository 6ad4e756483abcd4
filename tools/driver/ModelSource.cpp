#include "tools/driver/ModelSource.h"

#include "executor/Checkpoint.h"
#include "frontend/onnx/ModelFile.h"
#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "passes/BasicPasses.h"
#include "passes/Rebatch.h"
#include "passes/strategy/CompiledModule.h"

namespace graphc {

/// A directory, or an archive whose header is a checkpoint's. A damaged
/// archive is an error here, named once, not a second guess at its kind.
static llvm::Expected<bool> isCheckpoint(llvm::StringRef path) {
  auto isDir = isInputDirectory(path);
  if (!isDir)
    return isDir.takeError();
  if (*isDir)
    return true;
  if (!isArchiveFile(path))
    return false;
  auto header = readArchiveHeader(path);
  if (!header)
    return header.takeError();
  return llvm::StringRef(header->text).contains("checkpoint_step");
}

llvm::Error rebatchTo(LoadedModel &out, const ModelSpec &spec) {
  std::optional<int64_t> own = out.forward->batch();
  // A compiled plan runs at the batch it was compiled for.
  if (spec.batch <= 0 || spec.keepFixedBatch || !own || *own == spec.batch ||
      isCompiledForTraining(*out.forward))
    return llvm::Error::success();
  // A checkpoint's graph may hold the batch it was trained at because the
  // import bound it there (--batch), not because its file fixed one.
  out.batchNote = (out.fromCheckpoint ? "rebatched from the checkpoint's batch "
                                      : "rebatched from the model's fixed batch ") +
                  std::to_string(*own);
  if (auto e = rebatch(*out.forward, spec.batch)) {
    if (out.fromCheckpoint)
      return makeError("'" + spec.path + "' holds a graph bound to batch " + llvm::Twine(*own) +
                       " and cannot run at batch " + llvm::Twine(spec.batch) + ": " +
                       llvm::toString(std::move(e)) + "; run it at batch " + llvm::Twine(*own));
    auto input = dataInput(*out.forward);
    std::string name = input ? (*input)->name() : "x";
    if (!input)
      llvm::consumeError(input.takeError());
    return makeError("'" + spec.path + "' has a fixed batch of " + llvm::Twine(*own) +
                     " and cannot run at batch " + llvm::Twine(spec.batch) + ": " +
                     llvm::toString(std::move(e)) +
                     ". Export the model with a dynamic batch axis (PyTorch: "
                     "torch.onnx.export(..., dynamic_axes={'" +
                     name + "': {0: 'batch'}}); tf2onnx: a batch of None in the input signature)");
  }
  return llvm::Error::success();
}

llvm::Expected<LoadedModel> loadModel(const ModelSpec &spec) {
  LoadedModel out;
  if (spec.path.empty() && spec.name.empty())
    return makeError("no model given: pass a model file or --model NAME");
  if (!spec.path.empty() && !spec.name.empty())
    return makeError("give either a model file or --model, not both");
  if (!spec.name.empty()) {
    auto m = models::buildModel(spec.name, spec.options);
    if (!m)
      return m.takeError();
    out.forward = std::move(*m);
  } else if (auto ckptFile = isCheckpoint(spec.path); !ckptFile) {
    return ckptFile.takeError();
  } else if (*ckptFile) {
    auto ckpt = loadCheckpoint(spec.path);
    if (!ckpt)
      return ckpt.takeError();
    out.forward = std::move(ckpt->forward);
    out.fromCheckpoint = true;
    out.checkpointStep = ckpt->info.step;
    out.checkpointSeed = ckpt->info.seed;
    out.checkpointData = ckpt->info.data;
  } else {
    ImportOptions io;
    io.seed = spec.seed;
    io.batchIfNeeded = spec.batch;
    auto m = loadModelFile(spec.path, io);
    if (!m)
      return m.takeError();
    out.forward = std::move(*m);
    // What an ONNX import left unread, nodes and the variables only they read
    // (an op whose result an importer rule only looked at, such as the Expand
    // of a known zero that a recurrent cell takes as an absent state):
    // checkpoints keep the forward graph, and its export would write them. An
    // import writes no variable, so the unused ones are the unread ones.
    Graph *g = out.forward->findGraph("main");
    if (out.forward->plan().source == "onnx" && g && eliminateDeadCode(*g))
      out.forward->removeUnusedVariables();
  }
  if (auto e = rebatchTo(out, spec))
    return e;
  if (spec.seed && !out.forward->plan().seed)
    out.forward->plan().seed = (int64_t)spec.seed;
  return out;
}

llvm::Expected<const Node *> dataInput(const Module &forward) {
  const Graph *g = forward.findGraph("main");
  if (!g || g->inputs().empty())
    return makeError("model '" + forward.name() + "' has no graph input");
  return g->inputs().front();
}

} // namespace graphc
