//===- PassManagerTest.cpp - Verification between passes -------------------===//

#include "passes/Pass.h"

#include "ir/Builder.h"
#include "ir/Printer.h"

#include "TempDir.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

using namespace graphc;
using graphc::tempdir::fileText;
using graphc::tempdir::TempDir;

namespace {

std::unique_ptr<Module> smallModule() {
  auto m = std::make_unique<Module>("m");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 3}));
  m->main().addOutput(b.create(Op::Relu, {x}));
  return m;
}

std::unique_ptr<Pass> pass(std::string name, bool changes, int *runs = nullptr) {
  return std::make_unique<FunctionPass>(std::move(name), [=](Module &) -> llvm::Expected<bool> {
    if (runs)
      ++*runs;
    return changes;
  });
}

std::string run(PassManager &pm, Module &m) {
  llvm::Error e = pm.run(m);
  return e ? llvm::toString(std::move(e)) : "";
}

/// The file the error names after "the IR it failed on: ", or "".
std::string namedDump(const std::string &error) {
  llvm::StringRef rest = llvm::StringRef(error).split("(the IR it failed on: ").second;
  return rest.empty() ? "" : rest.drop_back().str(); // less the closing parenthesis
}

TEST(PassManager, AVerifyPassRunsOnlyWhereTheModuleIsNotVerifiedSinceItsLastChange) {
  auto m = smallModule();
  int checks = 0;
  PassManager pm;
  pm.add(pass("verify", false, &checks)); // nothing verified yet: runs
  pm.add(pass("verify", false, &checks)); // verified by the one before: skipped
  pm.add(pass("edit", true));             // changed, verified after it
  pm.add(pass("verify", false, &checks)); // skipped
  pm.add(pass("look", false));            // changes nothing
  pm.add(pass("verify", false, &checks)); // still verified: skipped
  EXPECT_EQ(run(pm, *m), "");
  EXPECT_EQ(checks, 1);
}

TEST(PassManager, AChangeThatBreaksTheModuleFailsAfterThatPass) {
  auto m = smallModule();
  PassManager pm;
  pm.add(pass("edit", true));
  pm.add(std::make_unique<FunctionPass>("break", [](Module &m) -> llvm::Expected<bool> {
    Node *relu = m.main().outputs()[0]->producer();
    relu->result()->setType(TensorType(DType::F32, {5}));
    return true;
  }));
  pm.add(pass("verify", false));
  std::string error = run(pm, *m);
  EXPECT_NE(error.find("IR failed verification after pass 'break'"), std::string::npos);
  llvm::sys::fs::remove(namedDump(error)); // the failure's dump (below)
}

/// A pass that edits the module (the Relu's requested device) and then fails.
std::unique_ptr<Pass> failing() {
  return std::make_unique<FunctionPass>("fail", [](Module &m) -> llvm::Expected<bool> {
    m.main().outputs()[0]->producer()->setRequestedDevice(DeviceId::gpu(7));
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "cannot go on");
  });
}

/// A pass that leaves a module the verifier refuses.
std::unique_ptr<Pass> breaking() {
  return std::make_unique<FunctionPass>("break", [](Module &m) -> llvm::Expected<bool> {
    m.main().outputs()[0]->producer()->result()->setType(TensorType(DType::F32, {5}));
    return true;
  });
}

TEST(PassManager, AFailingPassDumpsTheIrItLeftNumberedLikeTheOthers) {
  auto m = smallModule();
  TempDir dir;
  DumpOptions dump;
  dump.dumpDir = dir.path.str().str();
  PassManager pm({}, dump);
  pm.add(pass("edit", true));
  pm.add(failing());
  pm.add(pass("never", true));
  std::string error = run(pm, *m);
  EXPECT_NE(error.find("pass 'fail': cannot go on"), std::string::npos) << error;
  // The second pass failed: its dump is 0002, beside the first pass's 0001.
  const std::string failed = dir.file("0002.failed_fail.gir");
  EXPECT_EQ(namedDump(error), failed) << error;
  EXPECT_TRUE(llvm::sys::fs::exists(dir.file("0001.after_edit.gir")));
  EXPECT_FALSE(llvm::sys::fs::exists(dir.file("0003.after_never.gir")));
  // What the pass left, edits included.
  EXPECT_EQ(fileText(failed), toText(*m));
  EXPECT_NE(fileText(failed).find("gpu:7"), std::string::npos);
}

TEST(PassManager, AModuleTheVerifierRefusesIsDumpedEvenWithoutADumpDirectory) {
  auto m = smallModule();
  PassManager pm;
  pm.add(breaking());
  std::string error = run(pm, *m);
  EXPECT_NE(error.find("IR failed verification after pass 'break'"), std::string::npos) << error;
  const std::string dumped = namedDump(error);
  ASSERT_FALSE(dumped.empty()) << error;
  EXPECT_TRUE(llvm::sys::path::filename(dumped).startswith("graphc-failed-break")) << dumped;
  EXPECT_EQ(fileText(dumped), toText(*m));
  llvm::sys::fs::remove(dumped);
}

TEST(PassManager, APassErrorWithoutADumpDirectoryWritesNothing) {
  // What a user's input can cause (its message names the node) is no
  // compiler bug: no file appears unless --dump-dir asks for dumps.
  auto m = smallModule();
  PassManager pm;
  pm.add(failing());
  EXPECT_EQ(run(pm, *m), "pass 'fail': cannot go on");
}

TEST(PassManager, PrintingAfterAPassPrintsItsFailureToo) {
  auto m = smallModule();
  std::string printed;
  llvm::raw_string_ostream os(printed);
  DumpOptions dump;
  dump.printAfter = {"fail"};
  dump.printStream = &os;
  PassManager pm({}, dump);
  pm.add(failing());
  EXPECT_FALSE(run(pm, *m).empty());
  EXPECT_EQ(os.str(), "// ----- IR after fail failed -----\n" + toText(*m));
}

} // namespace
