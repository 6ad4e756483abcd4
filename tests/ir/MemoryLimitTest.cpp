//===- MemoryLimitTest.cpp - --memory-limit sizes and bounds --------------===//

#include "ir/MemoryLimit.h"
#include "ir/Type.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

int64_t parsed(llvm::StringRef text) {
  auto bytes = parseByteSize(text, "--memory-limit");
  if (!bytes) {
    ADD_FAILURE() << text.str() << ": " << llvm::toString(bytes.takeError());
    return -1;
  }
  return *bytes;
}

std::string refusal(llvm::StringRef text) {
  auto bytes = parseByteSize(text, "--memory-limit");
  if (bytes)
    return "accepted as " + std::to_string(*bytes);
  return llvm::toString(bytes.takeError());
}

/// Restores "no limit" after each test (the limit is process-wide).
class MemoryLimit : public ::testing::Test {
protected:
  void TearDown() override { setMemoryLimit(0); }
};

TEST_F(MemoryLimit, SizesAreBinaryWithOptionalUnits) {
  EXPECT_EQ(parsed("1000"), 1000);
  EXPECT_EQ(parsed("1000B"), 1000);
  EXPECT_EQ(parsed("1K"), 1024);
  EXPECT_EQ(parsed("512M"), int64_t(512) << 20);
  EXPECT_EQ(parsed("512mb"), int64_t(512) << 20);
  EXPECT_EQ(parsed("1.5GiB"), int64_t(3) << 29);
  EXPECT_EQ(parsed("8G"), int64_t(8) << 30);
  EXPECT_EQ(parsed("2T"), int64_t(2) << 40);
}

TEST_F(MemoryLimit, BadSizesAreRefusedNamingTheFlag) {
  for (llvm::StringRef bad :
       {"", "0", "-1", "abc", "1Q", "G", "1e3", "0.1", "1..5G", "9000000P", "9000000T"})
    EXPECT_NE(refusal(bad).find("--memory-limit " + bad.str() + ": "), std::string::npos)
        << bad.str() << ": " << refusal(bad);
}

TEST_F(MemoryLimit, BoundsTensorsOnlyWhenLowerThanTheTensorBound) {
  TensorType weight(DType::F32, {256, 784}); // 784 KiB
  EXPECT_TRUE(checkedBytes(weight));
  setMemoryLimit(512 << 10);
  EXPECT_FALSE(checkedBytes(weight));
  llvm::Error e = checkTensorSize(weight, "fc1.weight");
  EXPECT_EQ(llvm::toString(std::move(e)),
            "fc1.weight f32[256,784] is larger than the --memory-limit of 512.00 KiB");
  setMemoryLimit(int64_t(4) << 40); // above the 1 TiB bound, which stays
  EXPECT_EQ(tensorByteLimit(), kMaxTensorBytes);
  EXPECT_EQ(tensorLimitText(), "the 1 TiB a tensor may take");
}

TEST_F(MemoryLimit, HostBytesAreCountedAndGivenBack) {
  EXPECT_FALSE(reserveHostBytes(int64_t(1) << 40, "cpu:0")); // no limit: anything
  releaseHostBytes(int64_t(1) << 40);
  setMemoryLimit(1000);
  EXPECT_FALSE(reserveHostBytes(600, "cpu:0"));
  llvm::Error over = reserveHostBytes(600, "cpu:1");
  EXPECT_EQ(llvm::toString(std::move(over)),
            "cpu:1 needs 600 B more with 600 B already allocated, past the --memory-limit of "
            "1000 B");
  releaseHostBytes(600);
  EXPECT_FALSE(reserveHostBytes(1000, "cpu:0"));
  releaseHostBytes(1000);
}

} // namespace
