//===- TempDir.h - A directory of a test's own, removed after it -*- C++ -*-===//
//
// For tests that write files (pass dumps, modules) and read them back.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace graphc::tempdir {

/// The text of the file at `path`, or "" when it cannot be read.
inline std::string fileText(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  return buffer ? (*buffer)->getBuffer().str() : "";
}

struct TempDir {
  llvm::SmallString<128> path;
  TempDir() { EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("graphc-test", path)); }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string str() const { return path.str().str(); }
  /// The path of `name` inside it.
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    return p.str().str();
  }
  /// The names of its files, sorted.
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec; it.increment(ec))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    llvm::sort(names);
    return names;
  }
  /// The text of its file `name`, or "".
  std::string text(llvm::StringRef name) const { return fileText(file(name)); }
};

} // namespace graphc::tempdir
