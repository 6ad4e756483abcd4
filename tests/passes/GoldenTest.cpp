//===- GoldenTest.cpp - Before/expected modules for the training passes -----===//
//
// Every `tests/passes/golden/<dir>/<case>.gir` is parsed, run through a
// pipeline and compared structurally with `<case>.expected.gir`; a mismatch
// prints a line diff of the printed modules. Header lines of the input choose
// what runs:
//   # pipeline: autodiff          (default: the directory's name; "default":
//                                  the default training pipeline)
//   # options: batch=4 bn=frozen  (PassTestUtil.h parseOptions)
//
// GRAPHC_UPDATE_GOLDENS=1 rewrites the expected files instead (review the
// diff before committing them).
//
//===----------------------------------------------------------------------===//

#include "PassTestUtil.h"

#include "ir/Equivalence.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

using namespace graphc;

namespace {

const std::string kGoldenDir = GRAPHC_SOURCE_DIR "/tests/passes/golden";

std::vector<std::string> goldenInputs() {
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(kGoldenDir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef path = it->path();
    if (path.endswith(".gir") && !path.endswith(".expected.gir"))
      files.push_back(path.drop_front(kGoldenDir.size() + 1).str());
  }
  llvm::sort(files);
  return files;
}

/// A line diff (longest common subsequence); fine for files of a few hundred lines.
std::string lineDiff(llvm::StringRef expected, llvm::StringRef actual) {
  llvm::SmallVector<llvm::StringRef, 0> a, b;
  expected.split(a, '\n');
  actual.split(b, '\n');
  size_t n = a.size(), m = b.size();
  std::vector<std::vector<unsigned>> lcs(n + 1, std::vector<unsigned>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::string out;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      ++i, ++j;
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out += "- " + a[i++].str() + "\n";
    } else {
      out += "+ " + b[j++].str() + "\n";
    }
  }
  return out;
}

std::string headerValue(llvm::StringRef text, llvm::StringRef key) {
  llvm::SmallVector<llvm::StringRef, 0> lines;
  text.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (!line.consume_front("#"))
      continue;
    line = line.trim();
    if (line.consume_front(key) && line.consume_front(":"))
      return line.trim().str();
  }
  return "";
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, MatchesExpected) {
  std::string input = kGoldenDir + "/" + GetParam();
  std::string expectedPath = input.substr(0, input.size() - 4) + ".expected.gir";
  auto buffer = llvm::MemoryBuffer::getFile(input);
  ASSERT_TRUE(bool(buffer)) << input;
  llvm::StringRef text = (*buffer)->getBuffer();

  std::string pipeline = headerValue(text, "pipeline");
  if (pipeline.empty())
    pipeline = llvm::sys::path::filename(llvm::sys::path::parent_path(input)).str();
  auto opts = passtest::parseOptions(headerValue(text, "options"));
  ASSERT_TRUE(bool(opts)) << llvm::toString(opts.takeError());

  auto m = parseModule(text, input);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  llvm::Error err = passtest::runPipeline(**m, pipeline, *opts);
  ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
  std::string actual = toText(**m);

  const char *update = std::getenv("GRAPHC_UPDATE_GOLDENS");
  if (update && std::string(update) == "1") {
    std::ofstream(expectedPath) << actual;
    GTEST_SKIP() << "rewrote " << expectedPath;
  }
  auto expected = parseModuleFile(expectedPath);
  ASSERT_TRUE(bool(expected)) << llvm::toString(expected.takeError())
                              << "\n(run with GRAPHC_UPDATE_GOLDENS=1 to create it)";
  std::string why;
  if (!structurallyEqual(**expected, **m, &why))
    ADD_FAILURE() << GetParam() << " after '" << pipeline << "': " << why << "\n"
                  << lineDiff(toText(**expected), actual);
}

std::string testName(const ::testing::TestParamInfo<std::string> &info) {
  std::string name = info.param.substr(0, info.param.size() - 4);
  for (char &c : name)
    if (!llvm::isAlnum(c))
      c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Passes, Golden, ::testing::ValuesIn(goldenInputs()), testName);

TEST(Golden, FilesExist) {
  EXPECT_GE(goldenInputs().size(), 10u) << kGoldenDir;
}

TEST(Golden, LineDiffMarksChanges) {
  EXPECT_EQ(lineDiff("a\nb\nc", "a\nx\nc"), "- b\n+ x\n");
  EXPECT_EQ(lineDiff("a\nc", "a\nb\nc"), "+ b\n");
}

} // namespace
