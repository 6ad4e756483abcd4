//===- Modes.cpp - Parsing and naming the tower passes' modes ---------------===//

#include "ir/Modes.h"

#include "ir/Diagnostics.h"
#include "ir/NamedChoices.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstdio>

namespace graphc {

/// 4 -> "4", 0.5 -> "0.5".
static std::string number(double w) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", w);
  return buf;
}

namespace {
constexpr NamedChoice<BnMode> kBnModes[] = {
    {BnMode::Local, "local"}, {BnMode::Sync, "sync"}, {BnMode::Frozen, "frozen"}};
constexpr NamedChoice<RemainderPolicy> kRemainderPolicies[] = {
    {RemainderPolicy::Error, "error"},
    {RemainderPolicy::Drop, "drop"},
    {RemainderPolicy::Uneven, "uneven"}};
constexpr NamedChoice<Precision> kPrecisions[] = {
    {Precision::FP32, "fp32"}, {Precision::BF16, "bf16"}, {Precision::FP16, "fp16"}};
constexpr NamedChoice<LossKind> kLossKinds[] = {
    {LossKind::CrossEntropy, "cross-entropy"}, {LossKind::Nll, "nll"}, {LossKind::Mse, "mse"}};
constexpr NamedChoice<Strategy> kStrategies[] = {{Strategy::DataParallel, "data-parallel"},
                                                 {Strategy::ModelParallel, "model-parallel"},
                                                 {Strategy::Pipeline, "pipeline"}};
constexpr NamedChoice<PipelineSchedule> kPipelineSchedules[] = {
    {PipelineSchedule::OneFOneB, "1f1b"}, {PipelineSchedule::GPipe, "gpipe"}};
} // namespace

llvm::Expected<BnMode> parseBnMode(llvm::StringRef s) {
  return parseChoice<BnMode>(kBnModes, s, "batch norm mode");
}

llvm::Expected<RemainderPolicy> parseRemainderPolicy(llvm::StringRef s) {
  return parseChoice<RemainderPolicy>(kRemainderPolicies, s, "remainder policy");
}

llvm::Expected<Precision> parsePrecision(llvm::StringRef s) {
  return parseChoice<Precision>(kPrecisions, s, "precision");
}

llvm::StringRef modeName(Precision p) {
  return choiceName<Precision>(kPrecisions, p);
}

llvm::Expected<LossKind> parseLossKind(llvm::StringRef s) {
  return parseChoice<LossKind>(kLossKinds, s, "loss");
}

llvm::StringRef modeName(LossKind k) {
  return choiceName<LossKind>(kLossKinds, k);
}

llvm::Expected<Strategy> parseStrategy(llvm::StringRef s) {
  return parseChoice<Strategy>(kStrategies, s, "strategy");
}

llvm::StringRef modeName(Strategy s) {
  return choiceName<Strategy>(kStrategies, s);
}

llvm::Expected<RecomputeMode> parseRecomputeMode(llvm::StringRef s) {
  if (s == "off")
    return RecomputeMode::Off;
  if (s == "auto")
    return RecomputeMode::Auto;
  return makeError("--recompute " + printable(s) + ": expected auto or off");
}

llvm::StringRef modeName(RecomputeMode m) {
  return m == RecomputeMode::Auto ? "auto" : "off";
}

llvm::Expected<PipelineSchedule> parsePipelineSchedule(llvm::StringRef s) {
  return parseChoice<PipelineSchedule>(kPipelineSchedules, s, "pipeline schedule");
}

llvm::StringRef modeName(PipelineSchedule s) {
  return choiceName<PipelineSchedule>(kPipelineSchedules, s);
}

llvm::Expected<ParamPlacement> parseParamPlacement(llvm::StringRef s) {
  if (s == "cpu")
    return ParamPlacement{ParamPlacement::Cpu};
  if (s == "spread")
    return ParamPlacement{ParamPlacement::Spread};
  if (s == "mirrored")
    return ParamPlacement{ParamPlacement::Mirrored};
  if (s == "auto")
    return ParamPlacement{ParamPlacement::Auto};
  if (std::optional<DeviceId> d = DeviceId::parse(s); d && d->isGpu())
    return ParamPlacement::onGpu(d->index);
  return makeError("unknown parameter mode '" + printable(s) +
                   "'; known: cpu, gpu:K, spread, mirrored, auto");
}

llvm::Expected<SplitSpec> parseSplitSpec(llvm::StringRef s) {
  SplitSpec spec;
  if (s == "auto") {
    spec.kind = SplitSpec::Auto;
    return spec;
  }
  spec.kind = SplitSpec::Weights;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  s.split(parts, ',');
  for (llvm::StringRef p : parts) {
    double w = 0;
    if (p.trim().empty() || !llvm::to_float(p.trim(), w) || !(w >= 0) || !std::isfinite(w))
      return makeError("--split takes 'auto' or non-negative weights such as 4,4,2");
    spec.weights.push_back(w);
  }
  return spec;
}

llvm::StringRef modeName(BnMode m) {
  return choiceName<BnMode>(kBnModes, m);
}

llvm::StringRef modeName(RemainderPolicy p) {
  return choiceName<RemainderPolicy>(kRemainderPolicies, p);
}

std::string modeName(ParamPlacement p) {
  switch (p.kind) {
  case ParamPlacement::Cpu:
    return "cpu";
  case ParamPlacement::Gpu:
    return DeviceId::gpu(p.gpu).str();
  case ParamPlacement::Spread:
    return "spread";
  case ParamPlacement::Mirrored:
    return "mirrored";
  case ParamPlacement::Auto:
    return "auto";
  }
  llvm_unreachable("unknown ParamPlacement");
}

std::string modeName(const SplitSpec &s) {
  switch (s.kind) {
  case SplitSpec::Even:
    return "even";
  case SplitSpec::Weights:
    return llvm::join(llvm::map_range(s.weights, [](double w) { return number(w); }), ",");
  case SplitSpec::Auto:
    return "auto";
  }
  llvm_unreachable("unknown SplitSpec kind");
}

} // namespace graphc
