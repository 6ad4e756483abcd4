#include "tools/driver/ModelSource.h"

#include "executor/Checkpoint.h"
#include "frontend/onnx/ModelFile.h"
#include "ir/Diagnostics.h"

#include "llvm/Support/FileSystem.h"

namespace graphc {

static bool looksLikeCheckpoint(llvm::StringRef path) {
  if (llvm::sys::fs::is_directory(path))
    return true;
  if (!isArchiveFile(path))
    return false;
  auto a = readArchive(path);
  if (!a) {
    llvm::consumeError(a.takeError());
    return false;
  }
  return llvm::StringRef(a->text).contains("checkpoint_step");
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
  } else if (looksLikeCheckpoint(spec.path)) {
    auto ckpt = loadCheckpoint(spec.path);
    if (!ckpt)
      return ckpt.takeError();
    out.forward = std::move(ckpt->forward);
    out.fromCheckpoint = true;
    out.checkpointStep = ckpt->info.step;
  } else {
    ImportOptions io;
    io.seed = spec.seed;
    auto m = loadModelFile(spec.path, io);
    if (!m)
      return m.takeError();
    out.forward = std::move(*m);
  }
  if (spec.seed && !out.forward->meta().has("seed"))
    out.forward->meta().set("seed", (int64_t)spec.seed);
  return out;
}

llvm::Expected<const Node *> dataInput(const Module &forward) {
  const Graph *g = forward.findGraph("main");
  if (!g || g->inputs().empty())
    return makeError("model '" + forward.name() + "' has no graph input");
  return g->inputs().front();
}

} // namespace graphc
