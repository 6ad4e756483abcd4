//===- Modes.cpp - Parsing and naming the tower passes' modes ---------------===//

#include "ir/Modes.h"

#include "ir/Diagnostics.h"

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

llvm::Expected<BnMode> parseBnMode(llvm::StringRef s) {
  if (s == "local")
    return BnMode::Local;
  if (s == "sync")
    return BnMode::Sync;
  if (s == "frozen")
    return BnMode::Frozen;
  return makeError("unknown batch norm mode '" + printable(s) + "'; known: local, sync, frozen");
}

llvm::Expected<RemainderPolicy> parseRemainderPolicy(llvm::StringRef s) {
  if (s == "error")
    return RemainderPolicy::Error;
  if (s == "drop")
    return RemainderPolicy::Drop;
  if (s == "uneven")
    return RemainderPolicy::Uneven;
  return makeError("unknown remainder policy '" + printable(s) + "'; known: error, drop, uneven");
}

llvm::Expected<Precision> parsePrecision(llvm::StringRef s) {
  if (s == "fp32")
    return Precision::FP32;
  if (s == "bf16")
    return Precision::BF16;
  if (s == "fp16")
    return Precision::FP16;
  return makeError("unknown precision '" + printable(s) + "'; known: fp32, bf16, fp16");
}

llvm::StringRef modeName(Precision p) {
  switch (p) {
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  default:
    return "fp32";
  }
}

llvm::Expected<LossKind> parseLossKind(llvm::StringRef s) {
  if (s == "cross-entropy")
    return LossKind::CrossEntropy;
  if (s == "nll")
    return LossKind::Nll;
  if (s == "mse")
    return LossKind::Mse;
  return makeError("unknown loss '" + printable(s) + "'; known: cross-entropy, nll, mse");
}

llvm::StringRef modeName(LossKind k) {
  switch (k) {
  case LossKind::Nll:
    return "nll";
  case LossKind::Mse:
    return "mse";
  default:
    return "cross-entropy";
  }
}

llvm::Expected<Strategy> parseStrategy(llvm::StringRef s) {
  if (s == "data-parallel")
    return Strategy::DataParallel;
  if (s == "model-parallel")
    return Strategy::ModelParallel;
  if (s == "pipeline")
    return Strategy::Pipeline;
  return makeError("unknown strategy '" + printable(s) +
                   "'; known: data-parallel, model-parallel, pipeline");
}

llvm::StringRef modeName(Strategy s) {
  switch (s) {
  case Strategy::ModelParallel:
    return "model-parallel";
  case Strategy::Pipeline:
    return "pipeline";
  default:
    return "data-parallel";
  }
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
  if (s == "gpipe")
    return PipelineSchedule::GPipe;
  if (s == "1f1b")
    return PipelineSchedule::OneFOneB;
  return makeError("unknown pipeline schedule '" + s + "'; known: 1f1b, gpipe");
}

llvm::StringRef modeName(PipelineSchedule s) {
  return s == PipelineSchedule::GPipe ? "gpipe" : "1f1b";
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
  switch (m) {
  case BnMode::Local:
    return "local";
  case BnMode::Sync:
    return "sync";
  case BnMode::Frozen:
    return "frozen";
  }
  llvm_unreachable("unknown BnMode");
}

llvm::StringRef modeName(RemainderPolicy p) {
  switch (p) {
  case RemainderPolicy::Error:
    return "error";
  case RemainderPolicy::Drop:
    return "drop";
  case RemainderPolicy::Uneven:
    return "uneven";
  }
  llvm_unreachable("unknown RemainderPolicy");
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
