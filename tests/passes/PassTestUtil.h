//===- PassTestUtil.h - Shared helpers for the pass tests -------*- C++ -*-===//
//
// Options written as `key=value` words (the golden files' `# options:` line),
// running a pipeline by name, and small builders for test models.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "passes/Pass.h"

#include "llvm/ADT/StringExtras.h"

#include <random>
#include <string>

namespace graphc::passtest {

/// Parses `batch=4 bn=frozen optimizer=adam ...` into options.
inline llvm::Expected<CompileOptions> parseOptions(llvm::StringRef words) {
  CompileOptions o;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  words.split(parts, ' ', -1, false);
  for (llvm::StringRef p : parts) {
    // Not a structured binding: clang 14 (the sanitizer and fuzzing builds)
    // cannot capture one in the lambda below.
    std::pair<llvm::StringRef, llvm::StringRef> kv = p.split('=');
    llvm::StringRef key = kv.first, value = kv.second;
    double d = 0;
    bool isNumber = !value.getAsDouble(d);
    auto number = [&](double &field) -> llvm::Error {
      if (!isNumber)
        return makeError("option '" + key + "' needs a number, got '" + value + "'");
      field = d;
      return llvm::Error::success();
    };
    llvm::Error e = llvm::Error::success();
    if (key == "batch") {
      double batch = 0;
      e = number(batch);
      o.batch = (int64_t)batch;
    } else if (key == "bn") {
      if (auto bn = parseBnMode(value))
        o.bn = *bn;
      else
        e = bn.takeError();
    } else if (key == "optimizer")
      o.optimizer = value.str();
    else if (key == "momentum")
      e = number(o.momentum);
    else if (key == "nesterov")
      o.nesterov = value == "1" || value == "true";
    else if (key == "weight-decay")
      e = number(o.weightDecay);
    else if (key == "aux-loss-weight")
      e = number(o.auxLossWeight);
    else if (key == "rmsprop-decay")
      e = number(o.rmspropDecay);
    else if (key == "rmsprop-momentum")
      e = number(o.rmspropMomentum);
    else if (key == "rmsprop-epsilon")
      e = number(o.rmspropEpsilon);
    else if (key == "adam-beta1")
      e = number(o.adamBeta1);
    else if (key == "adam-beta2")
      e = number(o.adamBeta2);
    else if (key == "adam-epsilon")
      e = number(o.adamEpsilon);
    else if (key == "precision") {
      if (auto precision = parsePrecision(value))
        o.precision = *precision;
      else
        e = precision.takeError();
    } else if (key == "loss-scale")
      e = number(o.lossScale);
    else
      e = makeError("unknown option '" + key + "'");
    if (e)
      return e;
  }
  return o;
}

/// Runs a comma-separated pipeline ("default": kDefaultTrainingPipeline).
inline llvm::Error runPipeline(Module &m, llvm::StringRef pipeline, const CompileOptions &o) {
  PassManager pm(o);
  if (auto e = pm.addPipeline(pipeline == "default" ? kDefaultTrainingPipeline : pipeline))
    return e;
  return pm.run(m);
}

inline Value *addVariable(Builder &b, const std::string &name, llvm::ArrayRef<int64_t> shape,
                          VarKind kind = VarKind::Param, Initializer init = {"zeros", {}}) {
  Variable v;
  v.name = name;
  v.type = TensorType(DType::F32, shape);
  v.kind = kind;
  v.init = std::move(init);
  return b.newVariable(std::move(v));
}

/// A tensor of `t` (f32) drawn from N(0, 1) with `seed`.
inline Tensor randomTensor(const TensorType &t, unsigned seed) {
  Tensor r(t);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < r.numElements(); ++i)
    r.data<float>()[i] = dist(gen);
  return r;
}

} // namespace graphc::passtest
