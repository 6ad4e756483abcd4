//===- StrategyTestUtil.h - What the strategy tests share --------*- C++ -*-===//
#pragma once

#include "frontend/models/Models.h"
#include "ir/Module.h"
#include "passes/strategy/CompileRequest.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

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

/// A directory of its own for a test's dumps, removed after it.
struct TempDir {
  llvm::SmallString<128> path;
  TempDir() { EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("graphc-strategy-test", path)); }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string str() const { return path.str().str(); }
  /// The names of its files, sorted.
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec; it.increment(ec))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    llvm::sort(names);
    return names;
  }
  std::string text(llvm::StringRef name) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    auto buffer = llvm::MemoryBuffer::getFile(p);
    return buffer ? (*buffer)->getBuffer().str() : "";
  }
};

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
                      [](const Node *n) { return !n->assignedDevice().empty(); });
}

} // namespace graphc::strategytest
