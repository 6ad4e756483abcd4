//===- TestSupport.h - Shared helpers of the ONNX frontend tests -*- C++ -*-===//
//
// Where make_models.py put its files, the round trips every imported module
// must pass, and small queries the tests share.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/onnx/OnnxImporter.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <string>

namespace graphc::testing {

/// A file written by make_models.py.
std::string modelPath(llvm::StringRef name);
/// A fresh path in the test's temporary directory.
std::string tempPath(llvm::StringRef name);

/// The message of the error importing `name` gives ("" if it imports).
std::string importError(llvm::StringRef name, const ImportOptions &opts = {});

/// It verifies and prints and parses back equal (with weights when
/// `weights`, else the text forms without weights agree).
void expectPrintParses(const Module &m, bool weights = true);
/// It exports to ONNX that the ONNX checker accepts and imports back equal.
void expectExportImports(const Module &m);
/// What every imported module must satisfy: both of the above.
void expectRoundTrips(const Module &m, bool weights = true);

/// A copy of `m` whose variables hold the values export draws with `seed`.
std::unique_ptr<Module> materialised(const Module &m, uint64_t seed);

/// Runs ONNX's C++ checker; "" when the model is valid.
std::string onnxCheckerError(llvm::StringRef bytes);

/// Sum of element counts of the variables of `kind`.
int64_t countElements(const Module &m, VarKind kind);

/// The first node of graph main with op `op` (null if none).
const Node *firstNode(const Module &m, Op op);

} // namespace graphc::testing

#define ASSERT_OK_AND_ASSIGN(var, expr)                                                            \
  auto var##OrError = (expr);                                                                      \
  ASSERT_TRUE(bool(var##OrError)) << llvm::toString(var##OrError.takeError());                     \
  auto &var = *var##OrError
