//===- PlanInfo.cpp - The plan's facts and their text form ---------------===//

#include "ir/PlanInfo.h"

#include "ir/Diagnostics.h"
#include "ir/OpAttrs.h"

namespace graphc {
namespace {

/// A field of one type and its key: one table per type, so that toAttrs and
/// fromAttrs are the same walk in both directions.
template <typename T, typename Owner = PlanInfo> struct Field {
  llvm::StringLiteral key;
  std::optional<T> Owner::*member;
};

const Field<int64_t> kInts[] = {
    {"accumulate", &PlanInfo::accumulate},
    {"batch", &PlanInfo::batch},
    {"global_batch", &PlanInfo::globalBatch},
    {"loss_scale_interval", &PlanInfo::lossScaleInterval},
    {"micro_batches", &PlanInfo::microBatches},
    {"onnx_opset", &PlanInfo::onnxOpset},
    {"pipeline_stages", &PlanInfo::pipelineStages},
    {"pipelines", &PlanInfo::pipelines},
    {"ps", &PlanInfo::ps},
    {"ps_task", &PlanInfo::psTask},
    {"seed", &PlanInfo::seed},
    {"towers", &PlanInfo::towers},
    {"worker", &PlanInfo::worker},
    {"worker_offset", &PlanInfo::workerOffset},
    {"workers", &PlanInfo::workers},
};
const Field<int64_t, CheckpointPosition> kCheckpointInts[] = {
    {"checkpoint_batch", &CheckpointPosition::batch},
    {"checkpoint_epoch", &CheckpointPosition::epoch},
    {"checkpoint_epoch_batches", &CheckpointPosition::epochBatches},
    {"checkpoint_epoch_samples", &CheckpointPosition::epochSamples},
    {"checkpoint_seed", &CheckpointPosition::seed},
    {"checkpoint_step", &CheckpointPosition::step},
};
const Field<std::string, CheckpointPosition> kCheckpointStrings[] = {
    {"checkpoint_data", &CheckpointPosition::data},
};
/// Written as 0 or 1.
const Field<bool> kBools[] = {
    {"ps_async", &PlanInfo::psAsync},
    {"release_sent", &PlanInfo::releaseSent},
    {"training", &PlanInfo::training},
};
const Field<double> kFloats[] = {
    {"loss_scale", &PlanInfo::lossScale},
};
const Field<std::string> kStrings[] = {
    {"model_parallel", &PlanInfo::modelParallel}, {"optimizer", &PlanInfo::optimizer},
    {"params_auto", &PlanInfo::paramsAuto},       {"params_chosen", &PlanInfo::paramsChosen},
    {"params_why", &PlanInfo::paramsWhy},         {"pipeline", &PlanInfo::pipeline},
    {"source", &PlanInfo::source},
};
const Field<Ints> kIntLists[] = {
    {"ps_owners", &PlanInfo::psOwners},
    {"tower_batches", &PlanInfo::towerBatches},
    {"worker_towers", &PlanInfo::workerTowers},
};
const Field<Floats> kFloatLists[] = {
    {"split_speeds", &PlanInfo::splitSpeeds},
};
const Field<Strings> kStringLists[] = {
    {"exporter_folded", &PlanInfo::exporterFolded},
    {"ps_variables", &PlanInfo::psVariables},
};

/// The typed fields written as text: (key, write, read).
struct TextField {
  llvm::StringLiteral key;
  std::optional<std::string> (*write)(const PlanInfo &);
  llvm::Error (*read)(PlanInfo &, llvm::StringRef);
};

template <typename T> llvm::Error take(llvm::Expected<T> v, std::optional<T> &into) {
  if (!v)
    return v.takeError();
  into = std::move(*v);
  return llvm::Error::success();
}

/// "even" is what modeName writes for an even split; parseSplitSpec takes
/// the forms a user writes.
llvm::Expected<SplitSpec> parseWrittenSplit(llvm::StringRef s) {
  if (s == "even")
    return SplitSpec{};
  return parseSplitSpec(s);
}

template <typename T> std::optional<std::string> written(const std::optional<T> &v) {
  if (!v)
    return std::nullopt;
  return std::string(modeName(*v));
}

const TextField kTexts[] = {
    {"cluster",
     [](const PlanInfo &p) {
       return p.cluster ? std::optional<std::string>(clusterToJson(*p.cluster)) : std::nullopt;
     },
     [](PlanInfo &p, llvm::StringRef s) { return take(parseClusterJson(s), p.cluster); }},
    {"loss", [](const PlanInfo &p) { return written(p.loss); },
     [](PlanInfo &p, llvm::StringRef s) { return take(parseLossKind(s), p.loss); }},
    {"params", [](const PlanInfo &p) { return written(p.params); },
     [](PlanInfo &p, llvm::StringRef s) { return take(parseParamPlacement(s), p.params); }},
    {"pipeline_schedule", [](const PlanInfo &p) { return written(p.pipelineSchedule); },
     [](PlanInfo &p, llvm::StringRef s) {
       return take(parsePipelineSchedule(s), p.pipelineSchedule);
     }},
    {"precision", [](const PlanInfo &p) { return written(p.precision); },
     [](PlanInfo &p, llvm::StringRef s) { return take(parsePrecision(s), p.precision); }},
    {"split", [](const PlanInfo &p) { return written(p.split); },
     [](PlanInfo &p, llvm::StringRef s) { return take(parseWrittenSplit(s), p.split); }},
    {"strategy", [](const PlanInfo &p) { return written(p.strategy); },
     [](PlanInfo &p, llvm::StringRef s) { return take(parseStrategy(s), p.strategy); }},
    {"tasks",
     [](const PlanInfo &p) {
       return p.tasks ? std::optional<std::string>(tasksToJson(*p.tasks)) : std::nullopt;
     },
     [](PlanInfo &p, llvm::StringRef s) {
       // Every field is written, so the default GPU count is never used.
       return take(parseTasksJson(s, /*defaultGpus=*/0), p.tasks);
     }},
};

template <typename T, typename Owner, size_t N, typename Put>
void writeAll(const Owner &o, const Field<T, Owner> (&fields)[N], Put put) {
  for (const auto &f : fields)
    if (const auto &v = o.*f.member)
      put(f.key, *v);
}

template <typename T, typename Owner, size_t N, typename Get>
void readAll(Owner &o, const Field<T, Owner> (&fields)[N], const Attrs &meta, Get get) {
  for (const auto &f : fields)
    if (meta.has(f.key))
      o.*f.member = get(meta, f.key);
}

bool isKnown(llvm::StringRef key) {
  auto in = [&](const auto &fields) {
    for (const auto &f : fields)
      if (f.key == key)
        return true;
    return false;
  };
  return in(kInts) || in(kCheckpointInts) || in(kCheckpointStrings) || in(kBools) || in(kFloats) ||
         in(kStrings) || in(kIntLists) || in(kFloatLists) || in(kStringLists) || in(kTexts);
}

} // namespace

Attrs PlanInfo::toAttrs() const {
  Attrs a = other;
  auto put = [&](llvm::StringRef key, const auto &v) { a.set(key, Attribute(v)); };
  writeAll(*this, kInts, put);
  writeAll(checkpoint, kCheckpointInts, put);
  writeAll(checkpoint, kCheckpointStrings, put);
  writeAll(*this, kBools, [&](llvm::StringRef key, bool v) { a.set(key, int64_t(v)); });
  writeAll(*this, kFloats, put);
  writeAll(*this, kStrings, put);
  writeAll(*this, kIntLists, put);
  writeAll(*this, kFloatLists, put);
  writeAll(*this, kStringLists, put);
  for (const TextField &f : kTexts)
    if (auto text = f.write(*this))
      a.set(f.key, std::move(*text));
  return a;
}

Attrs PlanInfo::integerFacts() const {
  Attrs facts;
  const Attrs all = toAttrs();
  for (const auto &[key, value] : all.entries())
    if (std::holds_alternative<int64_t>(value))
      facts.set(key, value);
  return facts;
}

llvm::Expected<PlanInfo> PlanInfo::fromAttrs(const Attrs &meta) {
  // Kinds and ranges first (OpAttrs.def), so every read below finds its kind.
  if (auto e = checkModuleMeta(meta))
    return e;
  PlanInfo p;
  // The kinds are checked, so each getter finds its own.
  auto ints = [](const Attrs &a, llvm::StringRef k) { return a.getInt(k); };
  auto strings = [](const Attrs &a, llvm::StringRef k) { return a.getString(k); };
  readAll(p, kInts, meta, ints);
  readAll(p.checkpoint, kCheckpointInts, meta, ints);
  readAll(p.checkpoint, kCheckpointStrings, meta, strings);
  readAll(p, kBools, meta, [](const Attrs &a, llvm::StringRef k) { return a.getInt(k) != 0; });
  readAll(p, kFloats, meta, [](const Attrs &a, llvm::StringRef k) { return a.getFloat(k); });
  readAll(p, kStrings, meta, strings);
  readAll(p, kIntLists, meta, [](const Attrs &a, llvm::StringRef k) { return a.getInts(k); });
  readAll(p, kFloatLists, meta, [](const Attrs &a, llvm::StringRef k) { return a.getFloats(k); });
  readAll(p, kStringLists, meta, [](const Attrs &a, llvm::StringRef k) { return a.getStrings(k); });
  for (const TextField &f : kTexts)
    if (meta.has(f.key))
      if (auto e = f.read(p, meta.getString(f.key)))
        return makeError("module meta: attribute '" + f.key + "': " + llvm::toString(std::move(e)));
  for (const auto &[key, value] : meta.entries())
    if (!isKnown(key))
      p.other.set(key, value);
  return p;
}

llvm::Error checkPlanInfo(const PlanInfo &plan) {
  if (auto e = checkModuleMeta(plan.toAttrs()))
    return e;
  const int set = plan.pipelineStages.has_value() + plan.microBatches.has_value() +
                  plan.pipelines.has_value() + plan.pipelineSchedule.has_value();
  if (set != 0 && set != 4)
    return makeError("module meta: a pipeline's 'pipeline_stages', 'micro_batches', 'pipelines' "
                     "and 'pipeline_schedule' go together; " +
                     llvm::Twine(set) + " of them are set");
  if (set == 4 && plan.towers && *plan.towers != *plan.pipelines * *plan.microBatches)
    return makeError("module meta: " + llvm::Twine(*plan.pipelines) + " pipeline(s) of " +
                     llvm::Twine(*plan.microBatches) + " micro-batches need " +
                     llvm::Twine(*plan.pipelines * *plan.microBatches) + " towers; 'towers' is " +
                     llvm::Twine(*plan.towers));
  return llvm::Error::success();
}

} // namespace graphc
