//===- TrainingSessionTest.cpp - `graphrun train`'s phases, one at a time -===//
//
// tools/driver/TrainingSession.h: each test runs the phases a phase needs
// and checks that phase alone, in the world of one process, on an MLP small
// enough to train in milliseconds. The whole command line is tested end to
// end in cli_test.py and checkpoint_test.py.
//
//===----------------------------------------------------------------------===//
#include "tools/driver/TrainingSession.h"

#include "executor/Checkpoint.h"
#include "executor/dist/WorldOfOne.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/Trainer.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace graphc;

namespace {

#define ASSERT_OK(x)                                                                               \
  do {                                                                                             \
    if (llvm::Error err = (x))                                                                     \
      FAIL() << llvm::toString(std::move(err));                                                    \
  } while (0)

/// An MLP on 32 synthetic samples, 8 a batch: 4 steps an epoch.
TrainOptions tinyRun(int64_t steps) {
  TrainOptions o;
  o.model.name = "mlp";
  o.model.options.hiddenSizes = {8};
  o.compile.options.batch = 8;
  o.synthetic.samples = 32;
  o.steps = steps;
  o.progress = false;
  o.evaluate = false;
  o.executor.threads = 1;
  o.loaderThreads = 1;
  return o;
}

/// A directory of its own for a test's checkpoints, removed after it.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    llvm::SmallString<128> p;
    if (!llvm::sys::fs::createUniqueDirectory("graphc-training-session", p))
      path = p.str().str();
  }
  ~ScratchDir() { llvm::sys::fs::remove_directories(path); }
};

class TrainingSessionTest : public ::testing::Test {
protected:
  /// A session through the phases before the step loop (not the run plan).
  void prepare(const TrainOptions &opts) {
    auto created = TrainingSession::create(opts, alone, out);
    ASSERT_TRUE(bool(created)) << llvm::toString(created.takeError());
    session = std::move(*created);
    ASSERT_OK(session->readModel());
    ASSERT_FALSE(session->isPsTask());
    ASSERT_OK(session->openData());
    ASSERT_FALSE(session->nothingToTrain());
    ASSERT_OK(session->preparePlan());
    ASSERT_OK(session->createExecutor());
  }

  /// The session's world: this process alone.
  WorldOfOne alone;
  std::string log;
  llvm::raw_string_ostream out{log};
  std::unique_ptr<TrainingSession> session;
};

TEST_F(TrainingSessionTest, TheStepLoopRunsTwoStepsAlone) {
  ASSERT_NO_FATAL_FAILURE(prepare(tinyRun(2)));
  ASSERT_OK(session->trainSteps());
  EXPECT_EQ(session->executor().step(), 2u);
  ASSERT_EQ(session->result().losses.size(), 2u);
  for (double loss : session->result().losses)
    EXPECT_TRUE(std::isfinite(loss) && loss > 0) << loss;
  // The loop prints nothing of its own: the run plan and the summary are
  // phases of their own, and there is no test split to evaluate.
  EXPECT_EQ(out.str(), "");
}

TEST_F(TrainingSessionTest, RestoreTakesTheStepPositionAndVariablesOfACheckpoint) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path.empty());
  TrainOptions first = tinyRun(2);
  first.checkpointDir = dir.path;
  auto trained = runTraining(first, out, alone);
  ASSERT_TRUE(bool(trained)) << llvm::toString(trained.takeError());
  ASSERT_FALSE(trained->lastCheckpoint.empty());

  TrainOptions resumed = tinyRun(4);
  resumed.checkpointDir = dir.path;
  resumed.resume = true;
  ASSERT_NO_FATAL_FAILURE(prepare(resumed));
  EXPECT_EQ(session->executor().step(), 0u);
  ASSERT_OK(session->restoreCheckpoint());
  EXPECT_EQ(session->executor().step(), 2u);
  EXPECT_EQ(session->epoch(), 0);
  EXPECT_EQ(session->position().batches, 2); // 2 of the epoch's 4 batches were read
  EXPECT_EQ(session->result().lastCheckpoint, trained->lastCheckpoint);

  auto saved = loadModel({dir.path, "", {}, 0});
  ASSERT_TRUE(bool(saved)) << llvm::toString(saved.takeError());
  int compared = 0;
  for (const Variable &v : saved->forward->variables()) {
    if (!v.trainable() || v.data.empty())
      continue;
    auto value = session->executor().readVariable(v.name);
    ASSERT_TRUE(bool(value)) << llvm::toString(value.takeError());
    ASSERT_EQ(value->bytes(), v.data.bytes()) << v.name;
    EXPECT_EQ(std::memcmp(value->raw(), v.data.raw(), v.data.bytes()), 0) << v.name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST_F(TrainingSessionTest, ACheckpointAtTheRunsEndLeavesNothingToTrain) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path.empty());
  TrainOptions opts = tinyRun(2);
  opts.checkpointDir = dir.path;
  ASSERT_TRUE(bool(runTraining(opts, out, alone)));
  log.clear();

  opts.resume = true;
  auto created = TrainingSession::create(opts, alone, out);
  ASSERT_TRUE(bool(created)) << llvm::toString(created.takeError());
  session = std::move(*created);
  ASSERT_OK(session->readModel());
  ASSERT_OK(session->openData());
  ASSERT_TRUE(session->nothingToTrain());
  TrainResult r = session->reportNothingToTrain();
  EXPECT_TRUE(r.alreadyComplete);
  EXPECT_NE(out.str().find("nothing to train"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("is at step 2, the run's last"), std::string::npos) << out.str();
}

TEST_F(TrainingSessionTest, WriteCheckpointRecordsTheStepsTrainedSoFar) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path.empty());
  TrainOptions opts = tinyRun(3);
  opts.checkpointDir = dir.path;
  ASSERT_NO_FATAL_FAILURE(prepare(opts));
  ASSERT_OK(session->trainSteps());
  ASSERT_OK(session->writeCheckpoint());
  ASSERT_FALSE(session->result().lastCheckpoint.empty());
  std::vector<std::string> notes;
  auto found = loadForResume(dir.path, notes);
  ASSERT_TRUE(bool(found)) << llvm::toString(found.takeError());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->info.step, 3u);
  EXPECT_EQ((*found)->info.epochBatches, 3);
  EXPECT_EQ((*found)->path, session->result().lastCheckpoint);
}

} // namespace
