//===- WorldSizeTest.cpp - The workers from the launcher (issue 33) -------===//
//
// `graphrun train` under a launcher: without --workers (or tasks) the workers
// are the launcher's processes less the ps tasks; --workers and TF_CONFIG's
// cluster still decide when given, and a plan whose processes are not the
// world's is one error naming both numbers (tools/driver/WorldSize.h). The
// runs under mpirun are in tests/mpi/mpi_test.py (Mismatch, LauncherWorld).
//
//===----------------------------------------------------------------------===//
#include "tools/driver/WorldSize.h"
#include "tools/driver/CommandLine.h"
#include "tools/driver/FlagGroups.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace graphc;

namespace {

std::string message(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "ok";
}

LaunchedWorld world(Launcher launcher, unsigned size) {
  LaunchedWorld w;
  w.launcher = launcher;
  w.size = size;
  return w;
}

/// A training command line's TaskFlags after `args`, with TF_CONFIG read as
/// graphrun reads it.
struct Flags {
  CLI::App app{"test"};
  PlacementRequest place;
  TaskFlags tasks;
  llvm::Error readError = llvm::Error::success();

  explicit Flags(std::vector<std::string> args) {
    tasks.add(&app, place, TasksFor::Training);
    std::vector<char *> argv{const_cast<char *>("test")};
    for (std::string &a : args)
      argv.push_back(a.data());
    EXPECT_EQ(parseCommandLine(app, (int)argv.size(), argv.data(), "test"), std::nullopt);
    llvm::consumeError(std::move(readError));
    readError = tasks.readTasks(place);
  }
  ~Flags() { llvm::consumeError(std::move(readError)); }
};

/// Sets TF_CONFIG for the life of the object.
struct TfConfig {
  explicit TfConfig(const char *json) { setenv("TF_CONFIG", json, 1); }
  ~TfConfig() { unsetenv("TF_CONFIG"); }
};

TEST(WorldSize, WithoutWorkersTheLaunchersProcessesTrain) {
  Flags f({});
  ASSERT_EQ(message(std::move(f.readError)), "ok");
  EXPECT_EQ(f.tasks.workersFrom(f.place, world(Launcher::Mpirun, 4)), WorkersSource::Launcher);
  EXPECT_EQ(f.place.workers, 4);
  Flags s({});
  EXPECT_EQ(s.tasks.workersFrom(s.place, world(Launcher::Srun, 3)), WorkersSource::Launcher);
  EXPECT_EQ(s.place.workers, 3);
}

TEST(WorldSize, PsTasksAreTheLastRanksOfTheWorld) {
  Flags f({"--ps", "2"});
  EXPECT_EQ(f.tasks.workersFrom(f.place, world(Launcher::Mpirun, 6)), WorkersSource::Launcher);
  EXPECT_EQ(f.place.workers, 4);
  // No rank left to train: one worker, which checkWorldSize refuses.
  Flags g({"--ps", "2"});
  g.tasks.workersFrom(g.place, world(Launcher::Mpirun, 2));
  EXPECT_EQ(g.place.workers, 1);
  EXPECT_EQ(message(checkWorldSize(1, 2, WorkersSource::Launcher, world(Launcher::Mpirun, 2), 2)),
            "the plan is for 1 worker and 2 ps tasks (3 processes), but mpirun started 2 "
            "processes: pass `mpirun -np 3`");
}

TEST(WorldSize, WithoutALauncherOneWorkerTrains) {
  Flags f({});
  EXPECT_EQ(f.tasks.workersFrom(f.place, LaunchedWorld{}), WorkersSource::Default);
  EXPECT_EQ(f.place.workers, 1);
}

TEST(WorldSize, GivenWorkersAreKept) {
  Flags f({"--workers", "3"});
  EXPECT_EQ(f.tasks.workersFrom(f.place, world(Launcher::Mpirun, 4)), WorkersSource::Flag);
  EXPECT_EQ(f.place.workers, 3);
}

TEST(WorldSize, GivenWorkersThatDisagreeNameBothNumbers) {
  EXPECT_EQ(message(checkWorldSize(3, 0, WorkersSource::Flag, world(Launcher::Mpirun, 4), 4)),
            "the plan is for 3 workers (--workers 3), but mpirun started 4 processes: pass "
            "`mpirun -np 3`, or leave --workers out to train on 4");
  EXPECT_EQ(message(checkWorldSize(2, 2, WorkersSource::Flag, world(Launcher::Mpirun, 3), 3)),
            "the plan is for 2 workers (--workers 2) and 2 ps tasks (4 processes), but mpirun "
            "started 3 processes: pass `mpirun -np 4`, or leave --workers out to train on 1");
  EXPECT_EQ(message(checkWorldSize(3, 0, WorkersSource::Flag, world(Launcher::Srun, 2), 2)),
            "the plan is for 3 workers (--workers 3), but srun started 2 processes: pass `srun "
            "--ntasks 3`, or leave --workers out to train on 2");
  EXPECT_EQ(message(checkWorldSize(2, 0, WorkersSource::Flag, LaunchedWorld{}, 1)),
            "the plan is for 2 workers (--workers 2), but this process was not started by mpirun: "
            "run it as `mpirun -np 2 graphrun train ...`");
  EXPECT_EQ(message(checkWorldSize(4, 0, WorkersSource::Flag, world(Launcher::Mpirun, 4), 4)),
            "ok");
  EXPECT_EQ(message(checkWorldSize(4, 0, WorkersSource::Launcher, world(Launcher::Mpirun, 4), 4)),
            "ok");
}

TEST(WorldSize, AClusterOfAnotherSizeIsNamed) {
  EXPECT_EQ(message(checkWorldSize(2, 0, WorkersSource::Tasks, world(Launcher::Mpirun, 3), 3)),
            "the plan is for 2 workers, but mpirun started 3 processes: pass `mpirun -np 2`");
}

TEST(WorldSize, SrunTasksWithoutPmixAreNotOneWorld) {
  EXPECT_EQ(message(checkWorldSize(4, 0, WorkersSource::Launcher, world(Launcher::Srun, 4), 1)),
            "srun started 4 processes (SLURM_NTASKS), but MPI joined 1: srun's tasks form one MPI "
            "world only with PMIx (srun --mpi=pmix); or run mpirun inside the allocation");
}

TEST(WorldSize, TfConfigGivesTheWorkersAndWorkersMayRepeatIt) {
  TfConfig config(R"({"cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1"]},
                      "task": {"type": "chief", "index": 0}})");
  Flags f({});
  ASSERT_EQ(message(std::move(f.readError)), "ok");
  ASSERT_TRUE(f.place.tasks.has_value());
  EXPECT_EQ(f.place.tasks->numWorkers(), 3u);
  EXPECT_EQ(f.tasks.workersFrom(f.place, world(Launcher::Mpirun, 3)), WorkersSource::Tasks);
  Flags same({"--workers", "3"});
  ASSERT_EQ(message(std::move(same.readError)), "ok");
  EXPECT_TRUE(same.place.tasks.has_value());
}

TEST(WorldSize, WorkersThatContradictTfConfigAreRefused) {
  TfConfig config(R"({"cluster": {"chief": ["a:1"], "worker": ["b:1"]},
                      "task": {"type": "worker", "index": 0}})");
  Flags f({"--workers", "3"});
  EXPECT_EQ(message(std::move(f.readError)),
            "--workers 3, but TF_CONFIG's cluster has 2 training tasks (chief and workers): leave "
            "--workers out, or unset TF_CONFIG");
}

} // namespace
