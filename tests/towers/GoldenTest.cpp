//===- GoldenTest.cpp - Before/expected modules for the tower passes --------===//
//
// Every `tests/towers/golden/<pass>/<case>.gir` is parsed, run through one
// pass (the directory's name, or `# pipeline: a,b`) with the `# options:` of
// its header (GoldenOptions.h), and compared with `<case>.expected.gir`
// (tests/common/GoldenHarness.h). The inputs are
// the output of the previous pass on tiny graphs (two towers mostly), kept as
// text so a change elsewhere in the pipeline does not move these goldens.
//
// GRAPHC_UPDATE_GOLDENS=1 rewrites the expected files (review the diff).
//
//===----------------------------------------------------------------------===//

#include "GoldenHarness.h"
#include "GoldenOptions.h"
#include "TowerTestUtil.h"

#include "llvm/Support/Path.h"

#include <set>

using namespace graphc;
using namespace graphc::towertest;

namespace {

const std::string kGoldenDir = GRAPHC_SOURCE_DIR "/tests/towers/golden";

std::vector<std::string> goldenInputs() {
  return golden::inputs(kGoldenDir);
}

class TowerGolden : public testing::TestWithParam<std::string> {};

TEST_P(TowerGolden, MatchesExpected) {
  golden::check(kGoldenDir, GetParam(),
                [](Module &m, llvm::StringRef pipeline, llvm::StringRef options) -> llvm::Error {
                  auto opts = parseGoldenOptions(options);
                  if (!opts)
                    return opts.takeError();
                  return runPipeline(m, (pipeline + ",verify").str(), *opts);
                });
}

INSTANTIATE_TEST_SUITE_P(Passes, TowerGolden, testing::ValuesIn(goldenInputs()), golden::testName);

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
  EXPECT_EQ(modeName(o->params), "spread");
  EXPECT_EQ(o->split.weights, (std::vector<double>{4, 4, 2}));
  EXPECT_EQ(o->bucketBytes, 64);
  EXPECT_EQ(o->bn, BnMode::Sync);
  auto bad = parseGoldenOptions("towers=two");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("'towers' needs an integer"), std::string::npos);
}

} // namespace
