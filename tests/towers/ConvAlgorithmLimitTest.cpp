//===- ConvAlgorithmLimitTest.cpp - auto under --memory-limit ---------------===//
//
// Executor::create with ConvAlgorithm::Auto under a memory limit: where the
// plan fits only without Winograd's scratchpads, every convolution computes
// directly and algorithmNote() says why; where nothing fits, the first
// error stands; with room for both, Winograd stays. resnet18's training graph
// at batch 4 (its 3x3 convolutions take Winograd under auto on AVX-512).
//
//===----------------------------------------------------------------------===//

#include "ir/MemoryLimit.h"
#include "kernels/cpu/CpuBackend.h"
#include "tests/towers/TowerTestUtil.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

/// Host bytes an executor of `m` holds once created (no limit), or -1.
int64_t bytesHeld(const Module &m, ConvAlgorithm a) {
  ExecutorOptions o;
  o.threads = 2;
  o.convAlgorithm = a;
  int64_t before = reservedHostBytes();
  auto ex = Executor::create(m, o);
  if (!ex) {
    ADD_FAILURE() << llvm::toString(ex.takeError());
    return -1;
  }
  return reservedHostBytes() - before;
}

TEST(ConvAlgorithmUnderMemoryLimit, AutoGivesUpWinogradOnlyWhereItsScratchDoesNotFit) {
  if (!cpuHasWinograd())
    GTEST_SKIP() << "oneDNN has no Winograd convolution on this CPU";
  auto m = buildOrFail("resnet18", {});
  ASSERT_TRUE(m);
  CompileOptions co;
  co.batch = 4;
  ASSERT_FALSE(bool(runPipeline(*m, kSingleDevicePipeline, co)));
  assignRequested(*m);
  int64_t direct = bytesHeld(*m, ConvAlgorithm::Direct),
          winograd = bytesHeld(*m, ConvAlgorithm::Auto);
  ASSERT_GT(direct, 0);
  ASSERT_GT(winograd, direct + (16 << 20)) << "Winograd's scratch should need more memory";
  struct Case {
    int64_t limit;
    bool fits, note;
  } cases[] = {{(direct + winograd) / 2, true, true},
               {winograd + (1 << 20), true, false},
               {direct - (1 << 20), false, false}};
  for (const Case &c : cases) {
    SCOPED_TRACE("limit " + std::to_string(c.limit));
    setMemoryLimit(c.limit);
    ExecutorOptions o;
    o.threads = 2;
    auto ex = Executor::create(*m, o);
    setMemoryLimit(0);
    ASSERT_EQ(bool(ex), c.fits) << (ex ? "" : llvm::toString(ex.takeError()));
    if (!ex) {
      EXPECT_NE(llvm::toString(ex.takeError()).find("--memory-limit"), std::string::npos);
      continue;
    }
    EXPECT_EQ((*ex)->algorithmNote().empty(), !c.note) << (*ex)->algorithmNote();
    if (c.note) {
      EXPECT_NE((*ex)->algorithmNote().find("convolutions compute directly"), std::string::npos);
    }
  }
}

} // namespace
