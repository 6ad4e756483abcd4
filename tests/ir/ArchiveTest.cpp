#include "ir/Archive.h"
#include "ir/Builder.h"
#include "ir/Equivalence.h"

#include "llvm/Support/CRC.h"
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
  w.devices = {DeviceId::host(), DeviceId::cpu(1)};
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

namespace {

/// Writes an archive of two tensors and returns its bytes.
std::string twoTensorArchive(const std::string &path) {
  Archive a;
  a.text = "module m {\n}\n";
  a.tensors.push_back({"first", Tensor::fromFloats({2, 2}, {1, 2, 3, 4})});
  a.tensors.push_back({"second", Tensor::fromFloats({3}, {5, 6, 7})});
  EXPECT_FALSE(bool(writeArchive(path, a)));
  return (*llvm::MemoryBuffer::getFile(path))->getBuffer().str();
}

std::string readError(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  auto r = readArchive(path);
  return r ? std::string("(read fine)") : llvm::toString(r.takeError());
}

/// Re-stamps the header checksum after an edit of the header, as a crafted
/// file would.
void restampHeader(std::string &bytes) {
  uint64_t headerBytes;
  std::memcpy(&headerBytes, bytes.data() + 8, 8);
  uint32_t sum = llvm::crc32(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(bytes.data()), 16 + headerBytes));
  std::memcpy(&bytes[16 + headerBytes], &sum, 4);
}

} // namespace

TEST(Archive, EachTensorHasItsOwnChecksum) {
  std::string path = tempPath("sums.gck");
  std::string bytes = twoTensorArchive(path);
  // The data sits just before the end marker: "second" last, "first" before it.
  std::string flipped = bytes;
  flipped[bytes.size() - 8 - 1] ^= 1;
  EXPECT_NE(readError(path, flipped).find("tensor 'second' is corrupt (checksum mismatch)"),
            std::string::npos);
  flipped[bytes.size() - 8 - 12 - 1] ^= 1;
  EXPECT_NE(
      readError(path, flipped).find("2 tensors are corrupt (checksum mismatch): first, second"),
      std::string::npos);
  std::string header = bytes;
  header[20] ^= 1;
  EXPECT_NE(readError(path, header).find("the header is corrupt"), std::string::npos);
  EXPECT_NE(readError(path, bytes.substr(0, bytes.size() - 20))
                .find("is truncated: tensor 'second' (f32[3]) needs bytes"),
            std::string::npos);
  EXPECT_NE(readError(path, bytes + "x").find("1 unexpected bytes after the end marker"),
            std::string::npos);
  // The header alone needs no data.
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 20);
  auto h = readArchiveHeader(path);
  ASSERT_TRUE(bool(h)) << llvm::toString(h.takeError());
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->tensors[1].first, "second");
  EXPECT_EQ(h->tensors[1].second, TensorType(DType::F32, {3}));
  llvm::sys::fs::remove(path);
}

TEST(Archive, OtherFormatVersionsAreNamed) {
  std::string path = tempPath("v.gck");
  std::string bytes = twoTensorArchive(path);
  bytes[7] = '1';
  EXPECT_NE(readError(path, bytes).find("format version 1"), std::string::npos);
  bytes[7] = '3';
  EXPECT_NE(readError(path, bytes).find("format version 3; this graphc reads format version 2"),
            std::string::npos);
  EXPECT_TRUE(isArchiveFile(path));
  llvm::sys::fs::remove(path);
}

TEST(Archive, DeclaredSizesAreCheckedBeforeAllocating) {
  std::string path = tempPath("sizes.gck");
  std::string bytes = twoTensorArchive(path);
  // The first tensor's first dimension (after magic, H, text, count, name,
  // dtype and rank) becomes 2^62: its byte count overflows.
  size_t textBytes = std::string("module m {\n}\n").size();
  size_t dim0 = 16 + 8 + textBytes + 8 + 4 + 5 + 2;
  std::string huge = bytes;
  int64_t big = (int64_t)1 << 62;
  std::memcpy(&huge[dim0], &big, 8);
  restampHeader(huge);
  EXPECT_NE(readError(path, huge)
                .find("tensor 'first' declares 16 bytes of data for type "
                      "f32[4611686018427387904,2] (whose size overflows)"),
            std::string::npos);
  // A tensor count that the header cannot hold.
  std::string many = bytes;
  uint64_t count = (uint64_t)1 << 60;
  std::memcpy(&many[16 + 8 + textBytes], &count, 8);
  restampHeader(many);
  EXPECT_NE(readError(path, many).find("more than its"), std::string::npos);
  llvm::sys::fs::remove(path);
}

TEST(Archive, ChecksumsCanBeMadeToMatchForFuzzing) {
  std::string path = tempPath("restamp.gck");
  std::string bytes = twoTensorArchive(path);
  std::string mutated = bytes;
  mutated[bytes.size() - 8 - 1] ^= 1; // the data of "second"
  mutated[16 + 8 + 2] ^= 1;           // a byte of the text
  std::ofstream(path, std::ios::binary) << withValidChecksums(mutated);
  auto r = readArchive(path);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_NE(r->text, "module m {\n}\n");
  EXPECT_EQ(withValidChecksums("not an archive"), "not an archive");
  llvm::sys::fs::remove(path);
}
