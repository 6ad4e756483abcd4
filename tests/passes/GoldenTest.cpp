//===- GoldenTest.cpp - Before/expected modules for the training passes -----===//
//
// Every `tests/passes/golden/<dir>/<case>.gir` runs through its pipeline and is
// compared with `<case>.expected.gir` (tests/common/GoldenHarness.h). Header
// lines of the input choose what runs:
//   # pipeline: autodiff          (default: the directory's name; "default":
//                                  the default training pipeline)
//   # options: batch=4 bn=frozen  (PassTestUtil.h parseOptions)
//
// GRAPHC_UPDATE_GOLDENS=1 rewrites the expected files instead (review the
// diff before committing them).
//
//===----------------------------------------------------------------------===//

#include "GoldenHarness.h"
#include "PassTestUtil.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

const std::string kGoldenDir = GRAPHC_SOURCE_DIR "/tests/passes/golden";

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, MatchesExpected) {
  golden::check(kGoldenDir, GetParam(),
                [](Module &m, llvm::StringRef pipeline, llvm::StringRef options) -> llvm::Error {
                  auto opts = passtest::parseOptions(options);
                  if (!opts)
                    return opts.takeError();
                  return passtest::runPipeline(m, pipeline, *opts);
                });
}

INSTANTIATE_TEST_SUITE_P(Passes, Golden, ::testing::ValuesIn(golden::inputs(kGoldenDir)),
                         golden::testName);

TEST(Golden, FilesExist) {
  EXPECT_GE(golden::inputs(kGoldenDir).size(), 10u) << kGoldenDir;
}

TEST(Golden, LineDiffMarksChanges) {
  EXPECT_EQ(golden::lineDiff("a\nb\nc", "a\nx\nc"), "- b\n+ x\n");
  EXPECT_EQ(golden::lineDiff("a\nc", "a\nb\nc"), "+ b\n");
}

TEST(Golden, HeaderValues) {
  llvm::StringRef text = "# pipeline: autodiff\n#options : batch=4\n%x = Input()\n";
  EXPECT_EQ(golden::headerValue(text, "pipeline"), "autodiff");
  EXPECT_EQ(golden::headerValue(text, "options"), "batch=4");
  EXPECT_EQ(golden::headerValue(text, "missing"), "");
}

} // namespace
