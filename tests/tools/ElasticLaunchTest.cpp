//===- ElasticLaunchTest.cpp - What `graphrun launch --elastic` reads -----===//
//
// The parts of the elastic launch that need no mpirun (tools/driver/ElasticLaunch.h): the
// --elastic range, the hostfile, the hosts a segment takes, and the training flags it reads
// or refuses. The launch itself, across two network namespaces with a host cut off and
// back, is tests/mpi/elastic_test.py.
//
//===----------------------------------------------------------------------===//
#include "tools/driver/ElasticLaunch.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

std::string message(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "ok";
}

std::string range(llvm::StringRef text) {
  unsigned min = 0, max = 0;
  if (auto e = parseElasticRange(text, min, max))
    return llvm::toString(std::move(e));
  return std::to_string(min) + ":" + std::to_string(max);
}

/// "name:slots name:slots ..." of a hostfile, or its error.
std::string hosts(llvm::StringRef text) {
  auto parsed = parseHostfile(text, "HOSTS");
  if (!parsed)
    return llvm::toString(parsed.takeError());
  std::string s;
  for (const HostSlots &h : *parsed)
    s += (s.empty() ? "" : " ") + h.name + ":" + std::to_string(h.slots);
  return s;
}

std::string taken(llvm::ArrayRef<HostSlots> answering, unsigned max) {
  std::string s;
  for (const HostSlots &h : segmentHosts(answering, max))
    s += (s.empty() ? "" : " ") + h.name + ":" + std::to_string(h.slots);
  return s;
}

TEST(ElasticRange, TakesMinMaxOrOneNumber) {
  EXPECT_EQ(range("2:4"), "2:4");
  EXPECT_EQ(range("3:3"), "3:3");
  EXPECT_EQ(range("4"), "4:4");
  const std::string expected = "': expected MIN:MAX, the fewest and the most workers, "
                               "1 <= MIN <= MAX";
  for (const char *bad : {"4:2", "0:2", "two", "2:", ":4", "", "-1:2", "2:4:8"})
    EXPECT_EQ(range(bad), "--elastic '" + std::string(bad) + expected) << bad;
}

TEST(Hostfile, NamesSlotsCommentsAndBlankLines) {
  EXPECT_EQ(hosts("node0 slots=2\nnode1 slots=4\n"), "node0:2 node1:4");
  EXPECT_EQ(hosts("# the cluster\n\nnode0\n  node1   slots=3  # the big one\n"),
            "node0:1 node1:3");
  EXPECT_EQ(hosts("node0\tslots=2\r\nnode1 slots=2 max_slots=8\nnode2 max-slots=2\n"),
            "node0:2 node1:2 node2:1");
}

TEST(Hostfile, ABadLineIsNamedWithItsNumber) {
  EXPECT_EQ(hosts("node0 slots=2\nnode1 slot=2\n"),
            "HOSTS:2: 'slot=2': expected slots=N (N >= 1) after the host name");
  EXPECT_EQ(hosts("node0 slots=0\n"),
            "HOSTS:1: 'slots=0': expected slots=N (N >= 1) after the host name");
  EXPECT_EQ(hosts("node0 slots=two\n"),
            "HOSTS:1: 'slots=two': expected slots=N (N >= 1) after the host name");
  EXPECT_EQ(hosts("\n\nnode0 max_slots=\n"),
            "HOSTS:3: 'max_slots=': expected slots=N (N >= 1) after the host name");
  EXPECT_EQ(hosts("# nothing\n\n"), "HOSTS: no hosts");
  EXPECT_EQ(hosts(""), "HOSTS: no hosts");
}

TEST(SegmentHosts, TakesTheAnsweringHostsInOrderUpToMax) {
  const std::vector<HostSlots> answering = {{"a", 2}, {"b", 2}, {"c", 4}};
  EXPECT_EQ(taken(answering, 8), "a:2 b:2 c:4");
  EXPECT_EQ(taken(answering, 100), "a:2 b:2 c:4");
  EXPECT_EQ(taken(answering, 4), "a:2 b:2");
  EXPECT_EQ(taken(answering, 5), "a:2 b:2 c:1");
  EXPECT_EQ(taken(answering, 1), "a:1");
  EXPECT_EQ(taken({}, 4), "");
}

TEST(TrainFlags, ReadsTheCheckpointAndMetricsInBothSpellings) {
  std::string ckpt, metrics;
  ASSERT_EQ(message(readTrainFlags({"--model", "mlp", "--checkpoint", "c", "--metrics=m.jsonl"},
                                   ckpt, metrics)),
            "ok");
  EXPECT_EQ(ckpt, "c");
  EXPECT_EQ(metrics, "m.jsonl");
  ckpt.clear();
  metrics.clear();
  ASSERT_EQ(message(readTrainFlags({"--checkpoint=d"}, ckpt, metrics)), "ok");
  EXPECT_EQ(ckpt, "d");
  EXPECT_EQ(metrics, "");
}

TEST(TrainFlags, RefusesWhatAnElasticRunCannotHonour) {
  auto refusal = [](std::vector<std::string> train) {
    std::string ckpt, metrics;
    return message(readTrainFlags(train, ckpt, metrics));
  };
  EXPECT_EQ(refusal({"--model", "mlp"}),
            "an elastic run restarts from its checkpoints: give the training flags "
            "--checkpoint DIR (and --checkpoint-every N)");
  // A --checkpoint with no value is no directory.
  EXPECT_EQ(refusal({"--checkpoint"}),
            "an elastic run restarts from its checkpoints: give the training flags "
            "--checkpoint DIR (and --checkpoint-every N)");
  const std::string workers = ": an elastic run's workers are each segment's processes "
                              "(mpirun's); leave it out";
  EXPECT_EQ(refusal({"--checkpoint", "c", "--workers", "4"}), "--workers" + workers);
  EXPECT_EQ(refusal({"--checkpoint", "c", "--workers=4"}), "--workers" + workers);
  EXPECT_EQ(refusal({"--tasks=ps:1", "--checkpoint", "c"}), "--tasks" + workers);
  EXPECT_EQ(refusal({"--checkpoint", "c", "--metrics", "m.csv"}),
            "--metrics m.csv: an elastic run records its segments among the steps in JSON "
            "lines; name a .jsonl file");
}

} // namespace
