//===- StrategyTestUtil.h - What the strategy tests share --------*- C++ -*-===//
#pragma once

#include "frontend/models/Models.h"
#include "ir/Module.h"
#include "passes/strategy/CompileRequest.h"

#include "TempDir.h"

#include "llvm/ADT/STLExtras.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace graphc::strategytest {

/// A built-in model (small and quick to compile: mlp by default).
inline std::unique_ptr<Module> model(llvm::StringRef name = "mlp") {
  auto m = models::buildModel(name);
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
  return m ? std::move(*m) : nullptr;
}

/// A training request at a fixed batch and seed.
inline CompileRequest request(int64_t batch = 8) {
  CompileRequest req;
  req.options.batch = batch;
  req.options.seed = 5;
  return req;
}

inline std::string errorOf(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "";
}
template <typename T> std::string errorOf(llvm::Expected<T> &v) {
  return v ? "" : llvm::toString(v.takeError());
}

using graphc::tempdir::TempDir;

/// "0007.after_autodiff.gir" -> "autodiff".
inline std::string passOf(llvm::StringRef dumpFile) {
  return dumpFile.split('_').second.rsplit('.').first.str();
}

/// The passes of the dump files, in order ("after" dumps only).
inline std::vector<std::string> dumpedPasses(const TempDir &dir) {
  std::vector<std::string> passes;
  for (const std::string &f : dir.files())
    if (llvm::StringRef(f).contains(".after_") && llvm::StringRef(f).endswith(".gir"))
      passes.push_back(passOf(f));
  return passes;
}

/// The registered names of a comma-separated pipeline.
inline std::vector<std::string> namesOf(llvm::StringRef pipeline) {
  llvm::SmallVector<llvm::StringRef, 16> names;
  pipeline.split(names, ',', -1, false);
  std::vector<std::string> out;
  for (llvm::StringRef n : names)
    out.push_back(n.trim().str());
  return out;
}

/// Whether every node of the main graph carries an assigned device.
inline bool everyNodePlaced(const Module &m) {
  return llvm::all_of(m.findGraph("main")->nodes(),
                      [](const Node *n) { return n->assignedDevice().has_value(); });
}

} // namespace graphc::strategytest
