//===- WorldOfOneTest.cpp - A process that runs alone ---------------------===//
//
// executor/dist/WorldOfOne.h: rank 0 of 1 and the chief; every collective is
// its own answer; a ps task would leave no rank to train; there is no one to
// exchange messages with. startWorkers() gives this world to a process that
// mpirun did not launch.
//
//===----------------------------------------------------------------------===//

#include "executor/dist/StartWorkers.h"
#include "executor/dist/WorldOfOne.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace graphc;

namespace {

std::string errorOf(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "";
}

TEST(WorldOfOne, IsTheChiefAndEveryCollectiveIsItsOwnAnswer) {
  WorldOfOne alone;
  EXPECT_EQ(alone.rank(), 0u);
  EXPECT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone.numWorkers(), 1u);
  EXPECT_TRUE(alone.chief());
  EXPECT_FALSE(alone.isPsTask());
  EXPECT_EQ(alone.whoAmI(), "");
  WorkerCollectives &c = alone.collectives();
  EXPECT_EQ(errorOf(c.agree(42, "plan")), "");
  EXPECT_FALSE(c.rendezvousDone());
  EXPECT_TRUE(cantFail(c.any(true, "stop")));
  EXPECT_FALSE(cantFail(c.any(false, "stop")));
  EXPECT_EQ(cantFail(c.gather(7, "count")), std::vector<uint64_t>{7});
  std::vector<uint8_t> flags{0, 1, 0};
  EXPECT_EQ(errorOf(c.orFlags(flags, "failed samples")), "");
  EXPECT_EQ(flags, (std::vector<uint8_t>{0, 1, 0}));
  alone.setTimeout(std::chrono::milliseconds(1500));
  EXPECT_EQ(c.timeout(), std::chrono::milliseconds(1500));
  EXPECT_EQ(alone.messages().timeout(), std::chrono::milliseconds(1500));
}

TEST(WorldOfOne, RefusesPsTasksAndMessages) {
  WorldOfOne alone;
  EXPECT_EQ(errorOf(alone.setPsTasks(0)), "");
  EXPECT_EQ(errorOf(alone.setPsTasks(1)),
            "the run has 1 process and 1 ps task: no rank is left to train");
  Message m;
  EXPECT_EQ(errorOf(alone.messages().exchange({}, m, "sending gradients")),
            "sending gradients: this process runs no parameter-server exchange");
}

TEST(WorldOfOne, IsTheWorldOfAProcessNoLauncherStarted) {
  auto world = startWorkers(LaunchedWorld{});
  ASSERT_TRUE(bool(world)) << llvm::toString(world.takeError());
  EXPECT_NE(dynamic_cast<WorldOfOne *>(world->get()), nullptr);
}

} // namespace
