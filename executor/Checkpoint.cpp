//===- Checkpoint.cpp - One checkpoint file: writing, reading, fitting ----===//
//
// The directory side (step files, `latest`, keeping K, resume fallback) is in
// CheckpointDir.cpp.
//
//===----------------------------------------------------------------------===//
#include "executor/Checkpoint.h"

#include "ir/Diagnostics.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <set>

namespace graphc {

namespace {

/// A header entry that must be there (its kind and sign the header's parse
/// checked: ir/OpAttrs.def).
llvm::Expected<int64_t> headerInt(const std::optional<int64_t> &v, llvm::StringRef key,
                                  llvm::StringRef path) {
  if (!v)
    return makeError("'" + path + "' is not a checkpoint this graphc can resume: its header has " +
                     "no integer " + key);
  return *v;
}

/// Is `name` an optimizer slot ("<var>.<suffix>", the variable's type) of a
/// trainable variable of `m`?
bool isSlotOf(const Module &m, llvm::StringRef name, const TensorType &type) {
  size_t dot = name.rfind('.');
  if (dot == llvm::StringRef::npos)
    return false;
  const Variable *v = m.findVariable(name.take_front(dot));
  return v && v->trainable() && v->type == type;
}

/// What differs between a checkpoint's tensors and a module's variables.
struct Fit {
  std::vector<std::string> missing, unexpected, misshaped;
  /// The slot kinds ("momentum", "adam_m", ...) the module wants and the
  /// checkpoint has, when every difference is an optimizer slot.
  std::set<std::string> wantedSlots, savedSlots;
  bool onlySlotsDiffer = true;

  Fit(llvm::ArrayRef<NamedTensor> tensors, const Module &m) {
    llvm::StringMap<const Tensor *> saved;
    for (const NamedTensor &t : tensors)
      saved[t.name] = &t.tensor;
    bool targetHasSlots =
        llvm::any_of(m.variables(), [](const Variable &v) { return v.kind == VarKind::Slot; });
    for (const Variable &v : m.variables()) {
      if (!v.persistent())
        continue;
      auto it = saved.find(v.name);
      if (it == saved.end()) {
        if (!isLossScaleState(v.name)) { // a run that starts scaling now
          missing.push_back(v.name + " " + toString(v.type));
          noteSlot(v.kind == VarKind::Slot, v.name, wantedSlots);
        }
      } else if (it->second->type() != v.type) {
        misshaped.push_back(v.name + " (checkpoint " + toString(it->second->type()) + ", model " +
                            toString(v.type) + ")");
        onlySlotsDiffer = false;
      }
    }
    // Slots of a training checkpoint do not matter to a target without an
    // optimizer (evaluation, export), nor loss scaling's state to one that
    // does not scale.
    for (const NamedTensor &t : tensors) {
      if (m.findVariable(t.name) || isLossScaleState(t.name))
        continue;
      const bool slot = isSlotOf(m, t.name, t.tensor.type());
      if (targetHasSlots || !slot) {
        unexpected.push_back(t.name + " " + toString(t.tensor.type()));
        noteSlot(slot, t.name, savedSlots);
      }
    }
  }

  void noteSlot(bool isSlot, llvm::StringRef name, std::set<std::string> &kinds) {
    onlySlotsDiffer &= isSlot;
    if (isSlot)
      kinds.insert(name.rsplit('.').second.str());
  }

  bool ok() const { return missing.empty() && unexpected.empty() && misshaped.empty(); }

  llvm::Error error(const llvm::Twine &what) const {
    std::string msg = what.str();
    if (onlySlotsDiffer) {
      // Another --optimizer than the checkpoint's: say so, not every slot.
      auto kinds = [](const std::set<std::string> &k) {
        return k.empty() ? std::string("none (sgd)") : llvm::join(k, ", ");
      };
      return makeError(msg + ": it was trained with another optimizer (its slots per variable: " +
                       kinds(savedSlots) + "; this run's: " + kinds(wantedSlots) +
                       "); resume with the optimizer it was trained with, or start a new run "
                       "in another checkpoint directory");
    }
    const char *sep = ": ";
    auto list = [&](const char *kind, const std::vector<std::string> &names) {
      if (names.empty())
        return;
      size_t shown = std::min<size_t>(names.size(), 10);
      msg += sep + std::string(kind) + " (" + std::to_string(names.size()) +
             "): " + llvm::join(names.begin(), names.begin() + shown, ", ") +
             (shown < names.size() ? ", ..." : "");
      sep = "; ";
    };
    list("missing", missing);
    list("unexpected", unexpected);
    list("mis-shaped", misshaped);
    return makeError(msg);
  }
};

/// NaN or infinite values, named by tensor.
llvm::Error checkFinite(llvm::ArrayRef<NamedTensor> tensors, llvm::StringRef path) {
  std::vector<std::string> bad;
  for (const NamedTensor &t : tensors) {
    if (t.tensor.dtype() != DType::F32)
      continue;
    int64_t nan = 0, inf = 0;
    const float *p = t.tensor.data<float>();
    for (int64_t i = 0, n = t.tensor.numElements(); i < n; ++i)
      if (!std::isfinite(p[i]))
        ++(std::isnan(p[i]) ? nan : inf);
    if (nan || inf)
      bad.push_back(t.name + " (" +
                    (nan ? std::to_string(nan) + " NaN" + (inf ? ", " : "") : std::string()) +
                    (inf ? std::to_string(inf) + " infinite" : std::string()) + ")");
  }
  if (bad.empty())
    return llvm::Error::success();
  size_t shown = std::min<size_t>(bad.size(), 10);
  return makeError("checkpoint '" + path + "' holds values that are not finite in " +
                   llvm::Twine(bad.size()) + " tensor" + (bad.size() == 1 ? "" : "s") + ": " +
                   llvm::join(bad.begin(), bad.begin() + shown, ", ") +
                   (shown < bad.size() ? ", ..." : ""));
}

} // namespace

llvm::Error saveCheckpoint(llvm::StringRef path, const Module &forward, const Executor &ex,
                           const Module &compiled, const CheckpointInfo &info) {
  std::vector<NamedTensor> tensors;
  for (const Variable &v : compiled.variables()) {
    if (!v.persistent())
      continue;
    auto t = ex.readVariable(v.name);
    if (!t)
      return t.takeError();
    tensors.push_back({v.name, std::move(*t)});
  }
  return saveCheckpoint(path, forward, tensors, compiled, info);
}

llvm::Error saveCheckpoint(llvm::StringRef path, const Module &forward,
                           llvm::ArrayRef<NamedTensor> tensors, const Module &compiled,
                           const CheckpointInfo &info) {
  Archive a;
  // A header module (meta only) with the run's position, then the model.
  Module header(forward.name());
  header.plan() = forward.plan();
  CheckpointPosition &at = header.plan().checkpoint;
  at.step = (int64_t)info.step;
  at.epoch = info.epoch;
  at.epochBatches = info.epochBatches;
  at.epochSamples = info.epochSamples;
  at.seed = (int64_t)info.seed;
  at.batch = info.batch;
  at.data = info.data;
  a.text = toText(header) + toText(forward);
  llvm::StringMap<const Tensor *> byName;
  for (const NamedTensor &t : tensors)
    byName[t.name] = &t.tensor;
  for (const Variable &v : compiled.variables()) {
    if (!v.persistent())
      continue;
    auto it = byName.find(v.name);
    if (it == byName.end())
      return makeError("no value of variable '" + v.name + "' to save");
    if (it->second->type() != v.type)
      return makeError("variable '" + v.name + "' is " + toString(v.type) + ", its value " +
                       toString(it->second->type()));
    a.tensors.push_back({v.name, *it->second});
  }
  return writeArchive(path, a);
}

llvm::Expected<LoadedCheckpoint> loadCheckpointFile(llvm::StringRef pathRef) {
  const std::string path = pathRef.str();
  auto a = readArchive(path);
  if (!a)
    return a.takeError();
  // Two modules back to back: the header (meta only), then the model.
  llvm::StringRef text = a->text;
  size_t split = text.find("\nmodule ");
  if (split == llvm::StringRef::npos)
    return makeError("'" + path + "' is a graphc module file, not a checkpoint");
  auto header = parseModule(text.take_front(split + 1), path);
  if (!header)
    return header.takeError();
  auto model = parseModule(text.drop_front(split + 1), path);
  if (!model)
    return model.takeError();
  LoadedCheckpoint c;
  c.path = path;
  const CheckpointPosition &at = (*header)->plan().checkpoint;
  for (auto [key, value, field] :
       {std::tuple{"checkpoint_epoch", &at.epoch, &c.info.epoch},
        {"checkpoint_epoch_batches", &at.epochBatches, &c.info.epochBatches},
        {"checkpoint_epoch_samples", &at.epochSamples, &c.info.epochSamples},
        {"checkpoint_batch", &at.batch, &c.info.batch}}) {
    auto v = headerInt(*value, key, path);
    if (!v)
      return v.takeError();
    *field = *v;
  }
  auto step = headerInt(at.step, "checkpoint_step", path);
  auto seed = step ? headerInt(at.seed, "checkpoint_seed", path) : step.takeError();
  if (!seed)
    return seed.takeError();
  c.info.step = (uint64_t)*step;
  c.info.seed = (uint64_t)*seed;
  if (!at.data)
    return makeError("'" + path +
                     "' is not a checkpoint this graphc can resume: its header has "
                     "no data set");
  c.info.data = *at.data;

  Fit fit(a->tensors, **model);
  if (!fit.ok())
    return fit.error("checkpoint '" + path + "' does not match the model it carries ('" +
                     (*model)->name() + "')");
  if (auto e = checkFinite(a->tensors, path))
    return e;
  c.tensors = std::move(a->tensors);
  for (const NamedTensor &t : c.tensors)
    if (Variable *v = (*model)->findVariable(t.name)) {
      v->data = t.tensor;
      v->init = Initializer{};
    }
  c.forward = std::move(*model);
  return c;
}

llvm::Error checkFits(const LoadedCheckpoint &ckpt, const Module &plan) {
  Fit fit(ckpt.tensors, plan);
  if (!fit.ok())
    return fit.error("checkpoint '" + ckpt.path + "' does not fit the model '" + plan.name() + "'");
  return llvm::Error::success();
}

llvm::Error restorePartInto(const LoadedCheckpoint &ckpt, Executor &ex) {
  llvm::StringMap<const Tensor *> saved;
  for (const NamedTensor &t : ckpt.tensors)
    saved[t.name] = &t.tensor;
  for (const std::string &name : ex.variableNames()) {
    auto it = saved.find(name);
    if (it == saved.end())
      return makeError("checkpoint '" + ckpt.path + "' has no tensor '" + name + "'");
    if (auto e = ex.writeVariable(name, *it->second))
      return e;
  }
  ex.setStep(ckpt.info.step);
  return llvm::Error::success();
}

std::set<std::string> unusedSlots(const LoadedCheckpoint &ckpt, const Module &compiled) {
  std::set<std::string> kinds;
  for (const NamedTensor &t : ckpt.tensors)
    if (!compiled.findVariable(t.name) && isSlotOf(compiled, t.name, t.tensor.type()))
      kinds.insert(llvm::StringRef(t.name).rsplit('.').second.str());
  return kinds;
}

llvm::Error restoreInto(const LoadedCheckpoint &ckpt, const Module &compiled, Executor &ex) {
  if (auto e = checkFits(ckpt, compiled))
    return e;
  llvm::StringMap<const Tensor *> saved;
  for (const NamedTensor &t : ckpt.tensors)
    saved[t.name] = &t.tensor;
  for (const Variable &v : compiled.variables())
    if (v.persistent() && saved.count(v.name)) // loss scaling's may be new
      if (auto e = ex.writeVariable(v.name, *saved[v.name]))
        return e;
  ex.setStep(ckpt.info.step);
  return llvm::Error::success();
}

} // namespace graphc
