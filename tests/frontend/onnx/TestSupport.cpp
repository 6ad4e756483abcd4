//===- TestSupport.cpp - Shared helpers of the ONNX frontend tests --------===//

#include "TestSupport.h"

#include "frontend/onnx/OnnxExporter.h"

#include "ir/Clone.h"
#include "ir/Equivalence.h"
#include "ir/Initializers.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <onnx/checker.h>

namespace graphc::testing {

std::string modelPath(llvm::StringRef name) {
  llvm::SmallString<256> p(ONNX_TEST_MODELS);
  llvm::sys::path::append(p, name);
  return p.str().str();
}

std::string tempPath(llvm::StringRef name) {
  llvm::SmallString<256> dir;
  llvm::sys::path::system_temp_directory(true, dir);
  llvm::SmallString<256> p;
  llvm::sys::fs::createUniquePath(dir + "/graphc-onnx-%%%%%%-" + name, p, false);
  return p.str().str();
}

std::string importError(llvm::StringRef name, const ImportOptions &opts) {
  auto m = importOnnxFile(modelPath(name), opts);
  if (m)
    return "";
  return llvm::toString(m.takeError());
}

std::string onnxCheckerError(llvm::StringRef bytes) {
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), (int)bytes.size()))
    return "does not parse";
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

void expectPrintParses(const Module &m, bool weights) {
  ASSERT_FALSE(bool(verify(m))) << "imported module does not verify";
  PrintOptions opts;
  opts.weights = weights;
  std::string text = toText(m, opts);
  auto parsed = parseModule(text, m.name());
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  std::string why;
  if (weights)
    EXPECT_TRUE(structurallyEqual(m, **parsed, &why)) << "print/parse: " << why;
  else
    EXPECT_EQ(text, toText(**parsed, opts)) << "print/parse changes the module";
}

void expectExportImports(const Module &m) {
  auto bytes = exportOnnxBytes(m, 0, ExportForm::Training);
  ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
  EXPECT_EQ(onnxCheckerError(*bytes), "");
  auto back = importOnnxBytes(*bytes, {}, "exported " + m.name());
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  std::string why;
  EXPECT_TRUE(structurallyEqual(m, **back, &why)) << "export/import: " << why;
}

void expectRoundTrips(const Module &m, bool weights) {
  expectPrintParses(m, weights);
  expectExportImports(m);
}

std::unique_ptr<Module> materialised(const Module &m, uint64_t seed) {
  auto copy = cloneModule(m);
  for (Variable &v : copy->variables()) {
    v.data = llvm::cantFail(initialValue(v, seed));
    v.init = Initializer{};
  }
  return copy;
}

int64_t countElements(const Module &m, VarKind kind) {
  int64_t n = 0;
  for (const Variable &v : m.variables())
    if (v.kind == kind)
      n += v.type.numElements();
  return n;
}

const Node *firstNode(const Module &m, Op op) {
  for (const Node *n : m.findGraph("main")->nodes())
    if (n->op() == op)
      return n;
  return nullptr;
}

} // namespace graphc::testing
