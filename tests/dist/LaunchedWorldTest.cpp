//===- LaunchedWorldTest.cpp - What a launcher tells its processes (issue 33) -===//
//
// launchedWorld over a table of variables: mpirun's world size before
// Slurm's, Slurm's only in a job step, PMIx noted, and sizes that are not
// counts refused with the variable named.
//
//===----------------------------------------------------------------------===//
#include "executor/dist/StartWorkers.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

using namespace graphc;

namespace {

using Table = std::map<std::string, std::string>;

llvm::Expected<LaunchedWorld> worldOf(const Table &env) {
  return launchedWorld([&](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

LaunchedWorld expectWorld(const Table &env) {
  auto w = worldOf(env);
  if (!w) {
    ADD_FAILURE() << llvm::toString(w.takeError());
    return {};
  }
  return *w;
}

std::string errorOf(const Table &env) {
  auto w = worldOf(env);
  return w ? "no error" : llvm::toString(w.takeError());
}

TEST(LaunchedWorld, AProcessStartedAloneHasNoLauncher) {
  LaunchedWorld w = expectWorld({{"PATH", "/usr/bin"}});
  EXPECT_EQ(w.launcher, Launcher::None);
  EXPECT_EQ(w.size, 1u);
  EXPECT_FALSE(w.startsMpi());
}

TEST(LaunchedWorld, MpirunGivesOmpiCommWorldSize) {
  LaunchedWorld w = expectWorld({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"}});
  EXPECT_EQ(w.launcher, Launcher::Mpirun);
  EXPECT_EQ(w.size, 4u);
  EXPECT_STREQ(w.name(), "mpirun");
  EXPECT_TRUE(w.startsMpi());
}

TEST(LaunchedWorld, MpirunInsideASlurmAllocationIsMpirunsWorld) {
  // mpirun starts its daemons with srun: the ranks inherit the daemons' step
  // (one task per node), not the job's processes.
  LaunchedWorld w =
      expectWorld({{"OMPI_COMM_WORLD_SIZE", "8"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}});
  EXPECT_EQ(w.launcher, Launcher::Mpirun);
  EXPECT_EQ(w.size, 8u);
}

TEST(LaunchedWorld, SrunGivesSlurmNtasksInAJobStep) {
  LaunchedWorld w = expectWorld({{"SLURM_NTASKS", "3"}, {"SLURM_STEP_ID", "1"}});
  EXPECT_EQ(w.launcher, Launcher::Srun);
  EXPECT_EQ(w.size, 3u);
  EXPECT_STREQ(w.sizeVariable(), "SLURM_NTASKS");
  // Without PMIx the tasks cannot form an MPI world.
  EXPECT_FALSE(w.startsMpi());
  w = expectWorld({{"SLURM_NTASKS", "3"}, {"SLURM_STEP_ID", "1"}, {"PMIX_RANK", "0"}});
  EXPECT_TRUE(w.pmix);
  EXPECT_TRUE(w.startsMpi());
}

TEST(LaunchedWorld, ABatchScriptsOwnProcessHasNoLauncher) {
  // sbatch --ntasks=4 sets SLURM_NTASKS in the script, which srun has not started.
  LaunchedWorld w = expectWorld({{"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "7"}});
  EXPECT_EQ(w.launcher, Launcher::None);
  EXPECT_EQ(w.size, 1u);
}

TEST(LaunchedWorld, ASizeThatIsNotACountIsRefused) {
  EXPECT_EQ(errorOf({{"OMPI_COMM_WORLD_SIZE", "four"}}),
            "OMPI_COMM_WORLD_SIZE='four' (set by mpirun): expected a number of processes, at "
            "least 1");
  EXPECT_EQ(errorOf({{"SLURM_NTASKS", "0"}, {"SLURM_STEP_ID", "0"}}),
            "SLURM_NTASKS='0' (set by srun): expected a number of processes, at least 1");
  EXPECT_EQ(errorOf({{"OMPI_COMM_WORLD_SIZE", ""}}),
            "OMPI_COMM_WORLD_SIZE='' (set by mpirun): expected a number of processes, at least 1");
}

} // namespace
