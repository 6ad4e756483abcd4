//===- ConvAlgorithmFileTest.cpp - Choices kept across runs, no GPU -------===//
//
// The convolution choice file's format and its cache (read once, add keeps
// the first choice, save merges with what other processes wrote and replaces
// the file whole), where it lives, the math type cuDNN is asked under and the
// workspace budget.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/ConvAlgorithmFile.h"
#include "kernels/cuda/ConvPlan.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace graphc {
namespace {

using namespace cuda;

class ScratchDir {
public:
  ScratchDir() { EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("algo-file", dir_)); }
  ~ScratchDir() { llvm::sys::fs::remove_directories(dir_); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(dir_);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }

private:
  llvm::SmallString<128> dir_;
};

std::string readAll(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeAll(const std::string &path, const std::string &text) {
  std::ofstream(path) << text;
}

/// Sets an environment variable for one scope and restores it after.
class EnvScope {
public:
  EnvScope(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~EnvScope() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

private:
  const char *name_;
  std::optional<std::string> old_;
};

TEST(ConvAlgorithmFile, TablesRoundTripInKeyOrder) {
  AlgorithmTable t;
  t["NVIDIA H200 sm90 cudnn91400 cudart13000 | dir1 x[8, 3, 5, 5]"] = {4, 1, 1 << 20};
  t["NVIDIA H200 sm90 cudnn91400 cudart13000 | dir0 x[8, 3, 5, 5]"] = {1, 2, 0};
  t["NVIDIA H100 80GB HBM3 sm90 cudnn91400 cudart13000 | dir0 x[8, 3, 5, 5]"] = {7, 0,
                                                                                 uint64_t(3) << 30};
  std::string text = printAlgorithmTable(t);
  EXPECT_EQ(text.rfind("# graphc cuDNN convolution algorithms 1", 0), 0u) << text;
  // Sorted by key: the H100 line first, then dir0 before dir1.
  EXPECT_LT(text.find("H100"), text.find("dir0 x[8, 3, 5, 5]\t1"));
  EXPECT_LT(text.find("dir0 x[8, 3, 5, 5]\t1"), text.find("dir1"));
  unsigned skipped = 99;
  EXPECT_EQ(parseAlgorithmTable(text, &skipped), t);
  EXPECT_EQ(skipped, 0u);
  EXPECT_EQ(printAlgorithmTable(parseAlgorithmTable(text)), text);
}

TEST(ConvAlgorithmFile, LinesThatDoNotParseAreSkipped) {
  std::string text = "# a comment\n"
                     "\n"
                     "good | dir0\t1\t2\t3\n"
                     "no fields\n"
                     "short\t1\t2\n"
                     "negative\t-1\t0\t0\n"
                     "letters\t1\tx\t0\n"
                     "too big\t1\t0\t99999999999999999999999\n"
                     "\t1\t0\t0\n"
                     "extra\t1\t0\t0\t5\n"
                     "last | dir2\t0\t0\t4096"; // no final newline
  unsigned skipped = 0;
  AlgorithmTable t = parseAlgorithmTable(text, &skipped);
  EXPECT_EQ(skipped, 7u);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t["good | dir0"], (StoredAlgorithm{1, 2, 3}));
  EXPECT_EQ(t["last | dir2"], (StoredAlgorithm{0, 0, 4096}));
}

TEST(ConvAlgorithmFile, CacheReadsOnceKeepsTheFirstChoiceAndSavesOnlyMeasuredOnes) {
  ScratchDir dir;
  std::string path = dir.file("sub/dir/algos.txt");
  {
    ConvAlgorithmCache cache(path);
    EXPECT_EQ(cache.find("a"), std::nullopt); // no file yet
    EXPECT_EQ(cache.add("a", {1, 0, 10}, /*persist=*/true), (StoredAlgorithm{1, 0, 10}));
    // A second thread's measurement of the same key gets the first one back.
    EXPECT_EQ(cache.add("a", {2, 0, 20}, true), (StoredAlgorithm{1, 0, 10}));
    EXPECT_EQ(cache.add("heuristic", {3, 0, 0}, /*persist=*/false), (StoredAlgorithm{3, 0, 0}));
    // A kept choice over this caller's workspace budget gives way to its own.
    EXPECT_EQ(cache.add("big", {4, 0, 1000}, true), (StoredAlgorithm{4, 0, 1000}));
    EXPECT_EQ(cache.add("big", {5, 0, 100}, true, /*budget=*/500), (StoredAlgorithm{5, 0, 100}));
    EXPECT_EQ(cache.add("big", {6, 0, 50}, true, /*budget=*/500), (StoredAlgorithm{5, 0, 100}));
    EXPECT_EQ(cache.find("heuristic"), (StoredAlgorithm{3, 0, 0}));
    ASSERT_FALSE((bool)cache.save()); // creates the directories
  }
  AlgorithmTable saved = parseAlgorithmTable(readAll(path));
  EXPECT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved["a"], (StoredAlgorithm{1, 0, 10}));
  EXPECT_EQ(saved["big"], (StoredAlgorithm{5, 0, 100}));

  // The next run reads the choice back.
  ConvAlgorithmCache next(path);
  EXPECT_EQ(next.find("a"), (StoredAlgorithm{1, 0, 10}));
  EXPECT_EQ(next.find("heuristic"), std::nullopt);
  // Nothing added: save leaves the file alone (even a removed one).
  ASSERT_FALSE(llvm::sys::fs::remove(path));
  ASSERT_FALSE((bool)next.save());
  EXPECT_FALSE(llvm::sys::fs::exists(path));
}

TEST(ConvAlgorithmFile, SaveKeepsWhatAnotherProcessWroteMeanwhile) {
  ScratchDir dir;
  std::string path = dir.file("algos.txt");
  writeAll(path, printAlgorithmTable({{"old", {1, 1, 1}}}) + "garbage line\n");
  ConvAlgorithmCache mine(path);
  EXPECT_EQ(mine.find("old"), (StoredAlgorithm{1, 1, 1})); // read now
  // Another rank saves its own choices after we read the file.
  writeAll(path, printAlgorithmTable({{"old", {1, 1, 1}}, {"theirs", {5, 0, 0}}}));
  mine.add("mine", {2, 0, 64}, true);
  ASSERT_FALSE((bool)mine.save());
  std::string text = readAll(path);
  AlgorithmTable t = parseAlgorithmTable(text);
  EXPECT_EQ(t.size(), 3u) << text;
  EXPECT_EQ(t["theirs"], (StoredAlgorithm{5, 0, 0}));
  EXPECT_EQ(t["mine"], (StoredAlgorithm{2, 0, 64}));
  EXPECT_EQ(text.find("garbage"), std::string::npos); // the rewrite is clean
}

TEST(ConvAlgorithmFile, AFileThatCannotBeReadIsAnEmptyCacheAndAFailedSaveAnError) {
  ScratchDir dir;
  // A directory where the file should be: nothing read, the save fails with
  // a message naming the path, and the run goes on.
  std::string path = dir.file("is-a-dir");
  ASSERT_FALSE(llvm::sys::fs::create_directory(path));
  ConvAlgorithmCache cache(path);
  EXPECT_EQ(cache.find("a"), std::nullopt);
  cache.add("a", {1, 0, 0}, true);
  llvm::Error e = cache.save();
  ASSERT_TRUE((bool)e);
  EXPECT_NE(llvm::toString(std::move(e)).find("is-a-dir"), std::string::npos);
  // No path: nothing is ever written.
  ConvAlgorithmCache none("");
  none.add("a", {1, 0, 0}, true);
  EXPECT_FALSE((bool)none.save());
}

TEST(ConvAlgorithmFile, PathFromTheEnvironment) {
  {
    EnvScope cache("GRAPHC_CUDNN_CACHE", "/tmp/x/algos.txt");
    EXPECT_EQ(convAlgorithmFilePath(), "/tmp/x/algos.txt");
  }
  {
    EnvScope cache("GRAPHC_CUDNN_CACHE", "off");
    EXPECT_EQ(convAlgorithmFilePath(), "");
  }
  EnvScope cache("GRAPHC_CUDNN_CACHE", nullptr);
  {
    EnvScope xdg("XDG_CACHE_HOME", "/var/cache/me");
    EXPECT_EQ(convAlgorithmFilePath(), "/var/cache/me/graphc/cudnn-algorithms.txt");
  }
  EnvScope xdg("XDG_CACHE_HOME", nullptr);
  {
    EnvScope home("HOME", "/home/u");
    EXPECT_EQ(convAlgorithmFilePath(), "/home/u/.cache/graphc/cudnn-algorithms.txt");
  }
  EnvScope home("HOME", nullptr);
  EXPECT_EQ(convAlgorithmFilePath(), "");
}

TEST(ConvAlgorithmFile, DeviceContextNamesModelCapabilityAndVersionsOnOneField) {
  EXPECT_EQ(deviceContextKey(" NVIDIA H200 ", 9, 0, 91400, 13000),
            "NVIDIA H200 sm90 cudnn91400 cudart13000");
  // A tab in a device name would split the file's fields.
  EXPECT_EQ(deviceContextKey("odd\tname", 8, 6, 1, 2), "odd name sm86 cudnn1 cudart2");
}

TEST(ConvPlan, SixteenBitConvolutionsAreAskedUnderTensorOpMath) {
  ConvChoicePolicy tf32, strict;
  strict.allowTF32 = false;
  EXPECT_EQ(convQueryMath(tf32), ConvMath::Default);
  EXPECT_EQ(convQueryMath(strict), ConvMath::Fma);
  // f16 and bf16: tensor-op math, whatever the TF32 switch (which is about f32) says.
  for (DType t : {DType::F16, DType::BF16})
    for (bool allow : {true, false}) {
      ConvChoicePolicy p;
      p.data = t;
      p.allowTF32 = allow;
      EXPECT_EQ(convQueryMath(p), ConvMath::TensorOp) << dtypeName(t).str() << " " << allow;
    }
}

TEST(ConvPlan, WorkspaceBudgetFollowsFreeMemoryWithinBounds) {
  EXPECT_EQ(convWorkspaceBudget(0), kMinConvWorkspace);
  EXPECT_EQ(convWorkspaceBudget(size_t(512) << 20), kMinConvWorkspace); // 32 MiB -> the floor
  EXPECT_EQ(convWorkspaceBudget(size_t(16) << 30), size_t(1) << 30);    // 16 GiB free -> 1 GiB
  EXPECT_EQ(convWorkspaceBudget(size_t(140) << 30), kMaxConvWorkspace); // an H200 -> the cap
}

} // namespace
} // namespace graphc
