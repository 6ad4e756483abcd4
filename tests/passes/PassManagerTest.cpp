//===- PassManagerTest.cpp - Verification between passes -------------------===//

#include "passes/Pass.h"

#include "ir/Builder.h"

#include <gtest/gtest.h>

using namespace graphc;

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
  EXPECT_NE(run(pm, *m).find("IR failed verification after pass 'break'"), std::string::npos);
}

} // namespace
