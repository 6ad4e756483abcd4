#include "ir/Archive.h"
#include "ir/Builder.h"
#include "ir/Equivalence.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <fstream>
#include <gtest/gtest.h>

using namespace graphc;

namespace {
std::string tempPath(const char *name) {
  llvm::SmallString<128> p;
  llvm::sys::fs::createUniquePath(std::string("graphc-%%%%%%-") + name, p, true);
  return p.str().str();
}
} // namespace

TEST(Archive, ModuleFileIsLossless) {
  Module m("archived");
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 3}));
  Variable w;
  w.name = "w";
  w.type = TensorType(DType::F32, {2, 3});
  w.data = Tensor::fromFloats({2, 3}, {1, 2, 3, 4, 5, 6});
  w.devices = {"cpu:0", "cpu:1"};
  m.main().addOutput(b.create(Op::Mul, {x, b.newVariable(w)}));
  std::string path = tempPath("m.gmod");
  ASSERT_FALSE(bool(writeModuleFile(path, m)));
  EXPECT_TRUE(isArchiveFile(path));
  auto back = readModuleFile(path);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  std::string why;
  EXPECT_TRUE(structurallyEqual(m, **back, &why)) << why;
  llvm::sys::fs::remove(path);
}

TEST(Archive, TruncatedAndCorruptFilesAreRefused) {
  Archive a;
  a.text = "hello";
  a.tensors.push_back({"t", Tensor::fromFloats({4}, {1, 2, 3, 4})});
  std::string path = tempPath("a.gck");
  ASSERT_FALSE(bool(writeArchive(path, a)));
  auto buf = llvm::MemoryBuffer::getFile(path);
  std::string bytes = (*buf)->getBuffer().str();
  {
    std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 9);
    auto r = readArchive(path);
    ASSERT_FALSE(bool(r));
    EXPECT_NE(llvm::toString(r.takeError()).find("truncated"), std::string::npos);
  }
  {
    std::string flipped = bytes;
    flipped[30] ^= 1;
    std::ofstream(path, std::ios::binary) << flipped;
    auto r = readArchive(path);
    ASSERT_FALSE(bool(r));
    EXPECT_NE(llvm::toString(r.takeError()).find("corrupt"), std::string::npos);
  }
  {
    std::ofstream(path, std::ios::binary) << "not an archive at all";
    auto r = readArchive(path);
    ASSERT_FALSE(bool(r));
    EXPECT_NE(llvm::toString(r.takeError()).find("not a graphc"), std::string::npos);
  }
  llvm::sys::fs::remove(path);
}

TEST(Archive, FailedWriteKeepsTheOldFile) {
  std::string path = tempPath("keep.gck");
  Archive a;
  a.text = "old";
  ASSERT_FALSE(bool(writeArchive(path, a)));
  llvm::Error e = writeArchive("/nonexistent-dir/x.gck", a);
  EXPECT_TRUE(bool(e));
  llvm::consumeError(std::move(e));
  auto r = readArchive(path);
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(r->text, "old");
  llvm::sys::fs::remove(path);
}
