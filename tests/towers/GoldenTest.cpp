//===- GoldenTest.cpp - Before/expected modules for the tower passes --------===//
//
// Every `tests/towers/golden/<pass>/<case>.gir` is parsed, run through one
// pass (the directory's name, or `# pipeline: a,b`) with the `# options:` of
// its header (GoldenOptions.h), and compared structurally (ir/Equivalence.h)
// with `<case>.expected.gir`; a mismatch prints a line diff. The inputs are
// the output of the previous pass on tiny graphs (two towers mostly), kept as
// text so a change elsewhere in the pipeline does not move these goldens.
//
// GRAPHC_UPDATE_GOLDENS=1 rewrites the expected files (review the diff).
//
//===----------------------------------------------------------------------===//

#include "GoldenOptions.h"
#include "TowerTestUtil.h"

#include "ir/Equivalence.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <fstream>
#include <set>

using namespace graphc;
using namespace graphc::towertest;

namespace {

const std::string kGoldenDir = GRAPHC_SOURCE_DIR "/tests/towers/golden";

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

std::string header(llvm::StringRef text, llvm::StringRef key) {
  llvm::SmallVector<llvm::StringRef, 0> lines;
  text.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (!line.consume_front("#"))
      continue;
    line = line.ltrim();
    if (!line.consume_front(key))
      continue;
    line = line.ltrim();
    if (line.consume_front(":"))
      return line.trim().str();
  }
  return "";
}

/// The lines that differ, marked - (expected) and + (actual), by longest
/// common subsequence.
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
  for (size_t i = 0, j = 0; i < n || j < m;) {
    if (i < n && j < m && a[i] == b[j])
      ++i, ++j;
    else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]))
      out += "- " + a[i++].str() + "\n";
    else
      out += "+ " + b[j++].str() + "\n";
  }
  return out;
}

class TowerGolden : public testing::TestWithParam<std::string> {};

TEST_P(TowerGolden, MatchesExpected) {
  std::string input = kGoldenDir + "/" + GetParam();
  std::string expectedPath = input.substr(0, input.size() - 4) + ".expected.gir";
  auto buffer = llvm::MemoryBuffer::getFile(input);
  ASSERT_TRUE(bool(buffer)) << input;
  llvm::StringRef text = (*buffer)->getBuffer();
  std::string pipeline = header(text, "pipeline");
  if (pipeline.empty())
    pipeline = llvm::sys::path::filename(llvm::sys::path::parent_path(input)).str();
  auto opts = parseGoldenOptions(header(text, "options"));
  ASSERT_TRUE(bool(opts)) << llvm::toString(opts.takeError());

  auto m = parseModule(text, input);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  llvm::Error err = runPipeline(**m, pipeline + ",verify", *opts);
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

INSTANTIATE_TEST_SUITE_P(Passes, TowerGolden, testing::ValuesIn(goldenInputs()),
                         [](const testing::TestParamInfo<std::string> &info) {
                           std::string name = info.param.substr(0, info.param.size() - 4);
                           for (char &c : name)
                             if (!llvm::isAlnum(c))
                               c = '_';
                           return name;
                         });

TEST(TowerGolden, EveryPassHasGoldens) {
  std::set<std::string> passes;
  for (const std::string &f : goldenInputs())
    passes.insert(llvm::sys::path::parent_path(f).str());
  for (const char *pass :
       {"replicate-towers", "split-batch", "concat-outputs", "aggregate-gradients"})
    EXPECT_TRUE(passes.count(pass)) << pass;
}

TEST(TowerGolden, OptionsParse) {
  auto o = parseGoldenOptions("towers=3 params=spread split=4,4,2 bucket-bytes=64 bn=sync");
  ASSERT_TRUE(bool(o)) << llvm::toString(o.takeError());
  EXPECT_EQ(o->towers, 3);
  EXPECT_EQ(o->params, "spread");
  EXPECT_EQ(o->splitWeights, (std::vector<double>{4, 4, 2}));
  EXPECT_EQ(o->bucketBytes, 64);
  EXPECT_EQ(o->bnMode, "sync");
  auto bad = parseGoldenOptions("towers=two");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("'towers' needs an integer"), std::string::npos);
}

TEST(TowerGolden, LineDiffMarksChanges) {
  EXPECT_EQ(lineDiff("a\nb\nc", "a\nx\nc"), "- b\n+ x\n");
}

} // namespace
