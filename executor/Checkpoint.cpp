#include "executor/Checkpoint.h"

#include "ir/Diagnostics.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <unistd.h>

namespace graphc {

llvm::Error saveCheckpoint(llvm::StringRef path, const Module &forward, const Executor &ex,
                           const Module &compiled, CheckpointInfo info) {
  Archive a;
  // The forward model without weights; the step and epoch ride in its meta.
  std::unique_ptr<Module> header = std::make_unique<Module>(forward.name());
  header->meta() = forward.meta();
  header->meta().set("checkpoint_step", (int64_t)info.step);
  header->meta().set("checkpoint_epoch", info.epoch);
  std::string model = toText(forward);
  std::string meta = toText(*header);
  a.text = meta + model;
  for (const Variable &v : compiled.variables()) {
    auto t = ex.readVariable(v.name);
    if (!t)
      return t.takeError();
    a.tensors.push_back({v.name, std::move(*t)});
  }
  return writeArchive(path, a);
}

llvm::Error checkWritableDir(llvm::StringRef dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return makeError("cannot create checkpoint directory '" + dir + "': " + ec.message());
  llvm::SmallString<256> probe(dir);
  llvm::sys::path::append(probe, ".write-test." + std::to_string(::getpid()));
  if (auto e = writeFileAtomically(probe, "ok"))
    return makeError("checkpoint directory '" + dir + "' is not writable: " +
                     llvm::toString(std::move(e)));
  llvm::sys::fs::remove(probe);
  return llvm::Error::success();
}

llvm::Expected<std::string> saveCheckpointInDir(llvm::StringRef dir, const Module &forward,
                                                const Executor &ex, const Module &compiled,
                                                CheckpointInfo info, unsigned keep) {
  if (auto e = checkWritableDir(dir))
    return e;
  char name[32];
  snprintf(name, sizeof(name), "step-%08llu.gck", (unsigned long long)info.step);
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  if (auto e = saveCheckpoint(path, forward, ex, compiled, info))
    return e;
  llvm::SmallString<256> latest(dir);
  llvm::sys::path::append(latest, "latest");
  if (auto e = writeFileAtomically(latest, std::string(name) + "\n"))
    return e;
  // Keep the newest `keep` step files.
  std::vector<std::string> steps;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef file = llvm::sys::path::filename(it->path());
    if (file.startswith("step-") && file.endswith(".gck"))
      steps.push_back(it->path());
  }
  llvm::sort(steps);
  for (size_t i = 0; i + keep < steps.size(); ++i)
    llvm::sys::fs::remove(steps[i]);
  return path.str().str();
}

llvm::Expected<std::string> resolveCheckpoint(llvm::StringRef pathOrDir) {
  if (!llvm::sys::fs::is_directory(pathOrDir)) {
    if (!llvm::sys::fs::exists(pathOrDir))
      return makeError("no checkpoint at '" + pathOrDir + "'");
    return pathOrDir.str();
  }
  llvm::SmallString<256> latest(pathOrDir);
  llvm::sys::path::append(latest, "latest");
  auto buf = llvm::MemoryBuffer::getFile(latest);
  if (!buf)
    return makeError("checkpoint directory '" + pathOrDir + "' has no 'latest' file");
  llvm::SmallString<256> file(pathOrDir);
  llvm::sys::path::append(file, (*buf)->getBuffer().trim());
  return file.str().str();
}

llvm::Expected<LoadedCheckpoint> loadCheckpoint(llvm::StringRef pathOrDir) {
  auto path = resolveCheckpoint(pathOrDir);
  if (!path)
    return path.takeError();
  auto a = readArchive(*path);
  if (!a)
    return a.takeError();
  // Two modules back to back: the header (meta only), then the model.
  llvm::StringRef text = a->text;
  size_t split = text.find("\nmodule ");
  if (split == llvm::StringRef::npos)
    return makeError("'" + *path + "' is a graphc archive but not a checkpoint");
  auto header = parseModule(text.take_front(split + 1), *path);
  if (!header)
    return header.takeError();
  auto model = parseModule(text.drop_front(split + 1), *path);
  if (!model)
    return model.takeError();
  LoadedCheckpoint c;
  c.info.step = (uint64_t)(*header)->meta().getInt("checkpoint_step");
  c.info.epoch = (*header)->meta().getInt("checkpoint_epoch");
  c.tensors = std::move(a->tensors);
  for (const NamedTensor &t : c.tensors)
    if (Variable *v = (*model)->findVariable(t.name); v && v->type == t.tensor.type()) {
      v->data = t.tensor;
      v->init = Initializer{};
    }
  c.forward = std::move(*model);
  return c;
}

llvm::Error restoreInto(const LoadedCheckpoint &ckpt, const Module &compiled, Executor &ex) {
  std::vector<std::string> missing, unexpected, misshaped;
  llvm::StringMap<const Tensor *> saved;
  for (const NamedTensor &t : ckpt.tensors)
    saved[t.name] = &t.tensor;
  bool targetHasSlots = false;
  for (const Variable &v : compiled.variables())
    targetHasSlots |= v.kind == VarKind::Slot;
  for (const Variable &v : compiled.variables()) {
    auto it = saved.find(v.name);
    if (it == saved.end()) {
      missing.push_back(v.name + " " + toString(v.type));
      continue;
    }
    if (it->second->type() != v.type)
      misshaped.push_back(v.name + " (checkpoint " + toString(it->second->type()) + ", model " +
                          toString(v.type) + ")");
  }
  for (const NamedTensor &t : ckpt.tensors) {
    if (compiled.findVariable(t.name))
      continue;
    // Slots of a training checkpoint do not matter to a model without an optimizer.
    bool isSlot = false;
    if (!targetHasSlots)
      for (const Variable &v : compiled.variables())
        isSlot |= llvm::StringRef(t.name).startswith(v.name + ".");
    if (!isSlot)
      unexpected.push_back(t.name);
  }
  if (!missing.empty() || !unexpected.empty() || !misshaped.empty()) {
    std::string msg = "checkpoint does not fit the model '" + compiled.name() + "':";
    auto list = [&](const char *what, const std::vector<std::string> &names) {
      if (names.empty())
        return;
      msg += std::string("\n  ") + what + " (" + std::to_string(names.size()) + "): ";
      size_t shown = std::min<size_t>(names.size(), 10);
      msg += llvm::join(names.begin(), names.begin() + shown, ", ");
      if (shown < names.size())
        msg += ", ...";
    };
    list("missing", missing);
    list("unexpected", unexpected);
    list("mis-shaped", misshaped);
    return makeError(msg);
  }
  for (const Variable &v : compiled.variables())
    if (auto e = ex.writeVariable(v.name, *saved[v.name]))
      return e;
  ex.setStep(ckpt.info.step);
  return llvm::Error::success();
}

} // namespace graphc
