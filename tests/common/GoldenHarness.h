//===- GoldenHarness.h - Before/expected module tests ------------*- C++ -*-===//
//
// The golden tests of tests/passes and tests/towers share this harness: every
// `<dir>/<pass>/<case>.gir` is parsed, run through a pipeline and compared
// structurally (ir/Equivalence.h) with `<case>.expected.gir`; a mismatch
// prints a line diff of the printed modules. Header lines of the input say
// what runs:
//   # pipeline: a,b        (default: the pass directory's name)
//   # options: batch=4 ... (each suite parses its own)
//
// GRAPHC_UPDATE_GOLDENS=1 rewrites the expected files instead (review the
// diff before committing them).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace graphc::golden {

/// The inputs under `dir` (paths relative to it, sorted), expected files apart.
std::vector<std::string> inputs(const std::string &dir);

/// The value of a `# key: value` header line, or "".
std::string headerValue(llvm::StringRef text, llvm::StringRef key);

/// The lines that differ, marked - (expected) and + (actual), by longest
/// common subsequence; fine for files of a few hundred lines.
std::string lineDiff(llvm::StringRef expected, llvm::StringRef actual);

/// Runs `pipeline` with the suite's `options` header on a parsed module.
using RunFn = std::function<llvm::Error(Module &, llvm::StringRef pipeline,
                                        llvm::StringRef options)>;

/// The whole check of one case `relPath` under `dir` (gtest assertions).
void check(const std::string &dir, const std::string &relPath, const RunFn &run);

/// A gtest parameter name for a case path.
std::string testName(const ::testing::TestParamInfo<std::string> &info);

} // namespace graphc::golden
