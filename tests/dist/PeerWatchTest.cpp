//===- PeerWatchTest.cpp - Which ranks of this host are gone --------------===//
//
// executor/dist/PeerWatch.h with real processes: this one (alive), children
// that exited (a zombie not yet reaped, and one reaped), and a rank said to
// be on another host, whose process this host cannot see.
//
//===----------------------------------------------------------------------===//

#include "executor/dist/PeerWatch.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

using namespace graphc;

namespace {

/// A child that exits at once; reaped when `reap`.
uint64_t exitedChild(bool reap) {
  pid_t child = fork();
  if (child == 0)
    _exit(0);
  EXPECT_GT(child, 0);
  if (reap) {
    int status = 0;
    EXPECT_EQ(waitpid(child, &status, 0), child);
  } else {
    // Until it is a zombie.
    while (!PeerWatch::processGone((uint64_t)child))
      usleep(1000);
  }
  return (uint64_t)child;
}

TEST(PeerWatch, NamesTheRanksOfThisHostWhoseProcessIsGone) {
  PeerWatch watch;
  EXPECT_EQ(watch.goneRanks(), "") << "nothing is known before the rendezvous";
  const uint64_t host = PeerWatch::thisHost(), elsewhere = host ^ 1;
  const uint64_t zombie = exitedChild(/*reap=*/false), reaped = exitedChild(/*reap=*/true),
                 remote = exitedChild(/*reap=*/true);
  const uint64_t me = (uint64_t)getpid();
  watch.learn(1, {me, me, zombie, reaped, remote}, {host, host, host, host, elsewhere});
  EXPECT_TRUE(watch.learned());
  EXPECT_EQ(watch.goneRanks(), "rank 2 (pid " + std::to_string(zombie) + "), rank 3 (pid " +
                                   std::to_string(reaped) + ")");
  int status = 0;
  waitpid((pid_t)zombie, &status, 0);
}

TEST(PeerWatch, ALiveProcessIsNotGone) {
  EXPECT_FALSE(PeerWatch::processGone((uint64_t)getpid()));
  EXPECT_FALSE(PeerWatch::processGone(1));
}

} // namespace
