//===- TasksTest.cpp - Clusters of tasks: files, TF_CONFIG, ranks, errors --===//

#include "ir/Tasks.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace graphc;

namespace {

std::string parseError(llvm::StringRef json, unsigned defaultGpus = 0) {
  auto c = parseTasksJson(json, defaultGpus);
  if (c)
    return "(parsed)";
  return llvm::toString(c.takeError());
}

/// "chief node0 2, worker node1 1, ..." in rank order.
std::string ranks(const TaskCluster &c) {
  std::string s;
  for (const Task &t : c.tasks())
    s += (s.empty() ? "" : ", ") + taskRoleName(t.role).str() + std::to_string(t.index) + " " +
         t.host + " " + std::to_string(t.gpus);
  return s;
}

} // namespace

TEST(Tasks, ClusterFileRanksTheChiefThenWorkersThenPs) {
  // Listed out of order on purpose: the ranks follow the roles.
  auto c = parseTasksJson(R"({
    "ps": ["node3:2222", {"host": "node4"}],
    "worker": [{"host": "node1", "gpus": 1}, "node2:2222"],
    "chief": [{"host": "node0", "gpus": 2}]
  })",
                          /*defaultGpus=*/3);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(ranks(*c),
            "chief0 node0 2, worker0 node1 1, worker1 node2 3, ps0 node3 0, ps1 node4 0");
  EXPECT_EQ(c->numWorkers(), 3u);
  EXPECT_EQ(c->numPs(), 2u);
  EXPECT_TRUE(c->hasGpus());
  EXPECT_EQ(c->workerGpus(), (std::vector<unsigned>{2, 1, 3}));
  EXPECT_EQ(c->describe(0), "chief on node0");
  EXPECT_EQ(c->describe(2), "worker 1 on node2");
  EXPECT_EQ(c->describe(4), "ps 1 on node4");
  // What a plan records reads back to the same cluster, whatever the default.
  auto again = parseTasksJson(tasksToJson(*c), 7);
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(ranks(*again), ranks(*c));
}

TEST(Tasks, WithoutAChiefWorkerZeroIsTheChief) {
  auto c = parseTasksJson(R"({"worker": ["a", "b"]})", 0);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(ranks(*c), "worker0 a 0, worker1 b 0");
  EXPECT_FALSE(c->hasGpus());
  EXPECT_EQ(c->describe(0), "worker 0 (the chief) on a");
  EXPECT_EQ(ranks(TaskCluster::uniform(2, 1, 4)),
            "worker0 localhost 4, worker1 localhost 4, ps0 localhost 0");
}

TEST(Tasks, TfConfigGivesRolesAndOrderHostsDocumentOnly) {
  const char *tf = R"({"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "[::1]:2223"],
                                    "ps": ["host2:2222"]},
                       "task": {"type": "worker", "index": 1}})";
  auto c = parseTasksJson(tf, 2);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(ranks(*c), "chief0 host0 2, worker0 host1 2, worker1 [::1] 2, ps0 host2 0");
  // "task" must name a task of the cluster; the rank decides which one runs.
  EXPECT_EQ(
      parseError(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}})"),
      "task: worker 1 is not in the cluster (1 worker task)");
  EXPECT_EQ(
      parseError(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "evaluator", "index": 0}})"),
      "task: type 'evaluator' is not one of chief, worker, ps");
  EXPECT_EQ(parseError(R"({"cluster": {"worker": ["a:1"]}, "rpc_layer": "grpc"})"),
            "TF_CONFIG: unknown field 'rpc_layer' (known: cluster, task)");
}

TEST(Tasks, TfConfigFromTheEnvironment) {
  ::unsetenv("TF_CONFIG");
  auto none = tasksFromEnvironment(0);
  ASSERT_TRUE(bool(none));
  EXPECT_FALSE(none->has_value());
  ::setenv("TF_CONFIG",
           R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}})", 1);
  auto c = tasksFromEnvironment(1);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ(ranks(**c), "worker0 a 1, worker1 b 1");
  ::setenv("TF_CONFIG", R"({"cluster": {"worker": ["a:1"], "evaluator": ["e:1"]}})", 1);
  auto bad = tasksFromEnvironment(0);
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "TF_CONFIG: cluster.evaluator: role 'evaluator' is not one of chief, worker, ps "
            "(graphrun's chief evaluates after every epoch)");
  ::unsetenv("TF_CONFIG");
}

TEST(Tasks, BadClustersNameTheEntry) {
  EXPECT_EQ(parseError(R"({"chief": ["a", "b"], "worker": ["c"]})"),
            "the cluster lists 2 chief tasks; it has at most one (without one, worker 0 is the "
            "chief)");
  EXPECT_EQ(parseError(R"({"ps": ["a"]})"), "the cluster has no chief or worker task to train");
  EXPECT_EQ(parseError(R"({"worker": [], "chief": []})"),
            "the cluster has no chief or worker task to train");
  EXPECT_EQ(parseError(R"({"worker": ["a"], "ps": [{"host": "b", "gpus": 1}]})"),
            "ps[0]: a ps task holds variables on its host; 'gpus' is for chief and worker tasks");
  EXPECT_EQ(parseError(R"({"worker": [{"host": "a", "gpus": 1.5}]})"),
            "worker[0]: field 'gpus' must be a whole number from 0 to 1023");
  EXPECT_EQ(parseError(R"({"worker": [{"host": "a", "gpus": -1}]})"),
            "worker[0]: field 'gpus' must be a whole number from 0 to 1023");
  EXPECT_EQ(parseError(R"({"worker": [{"host": "a", "gpus": 2}, "b"]})"),
            "worker[1] has no GPU but worker[0] has 2: give every chief and worker task GPUs "
            "(\"gpus\", or --gpus for those without), or none (one tower on its host)");
  // With --gpus, the entry without "gpus" gets it.
  EXPECT_EQ(parseError(R"({"worker": [{"host": "a", "gpus": 2}, "b"]})", 1), "(parsed)");
  EXPECT_EQ(parseError(R"({"worker": [{"host": "a", "devices": 2}]})"),
            "worker[0]: unknown field 'devices' (known: gpus, host)");
  EXPECT_EQ(parseError(R"({"worker": [{"gpus": 2}]})"), "worker[0]: missing field 'host'");
  EXPECT_EQ(parseError(R"({"worker": [3]})"),
            "worker[0] must be an address \"host:port\" or an object {\"host\": ..., \"gpus\": "
            "...}");
  EXPECT_EQ(parseError(R"({"worker": ["node 1"]})"),
            "worker[0]: host 'node 1' must be a host name or address (no spaces or control "
            "characters)");
  EXPECT_EQ(parseError(R"({"worker": "a"})"), "worker must be a list of tasks");
  EXPECT_EQ(parseError(R"({"workers": ["a"]})"),
            "workers: role 'workers' is not one of chief, worker, ps");
  EXPECT_EQ(parseError(R"({"cluster": {"worker": {"a": 1}}})"),
            "cluster.worker must be a list of tasks");
  EXPECT_EQ(parseError("[\"a\"]"),
            "a cluster of tasks is one JSON object: {\"worker\": [...], ...} or TF_CONFIG's "
            "{\"cluster\": {...}, \"task\": {...}}");
  EXPECT_EQ(
      parseError("{\"worker\": [\"a\"],}").rfind("the cluster of tasks is not valid JSON: ", 0),
      0u);
  EXPECT_EQ(parseError(std::string(100000, '{')),
            "the cluster of tasks nests arrays and objects 100000 deep; a cluster of tasks needs "
            "4 (at most 16 are read)");
}

TEST(Tasks, FileErrorsStartWithThePath) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("tasks", "json", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << R"({"worker": ["a", {"host": "b", "gpus": "two"}]})";
  }
  auto c = loadTasksFile(path, 0);
  ASSERT_FALSE(bool(c));
  EXPECT_EQ(llvm::toString(c.takeError()),
            std::string(path) + ": worker[1]: field 'gpus' must be a number");
  llvm::sys::fs::remove(path);
  auto missing = loadTasksFile("/nonexistent/tasks.json", 0);
  ASSERT_FALSE(bool(missing));
  EXPECT_EQ(llvm::toString(missing.takeError())
                .rfind("cannot read the cluster of tasks '/nonexistent/tasks.json': ", 0),
            0u);
}

// Issue 28: a TF_CONFIG address whose port is not a number ("NaN") was read
// as a host named "node0:NaN".
TEST(Tasks, AnAddressPortIsAWholeNumber) {
  EXPECT_EQ(parseError(R"({"cluster": {"chief": ["node0:NaN"], "worker": ["node1:2222"]}})"),
            "cluster.chief[0]: address 'node0:NaN' must be \"host:port\" with a port from 0 to "
            "65535");
  EXPECT_EQ(parseError(R"({"worker": ["node1:65536"]})"),
            "worker[0]: address 'node1:65536' must be \"host:port\" with a port from 0 to 65535");
  EXPECT_EQ(parseError(R"({"worker": [":2222"]})"),
            "worker[0]: address ':2222' must be \"host:port\" with a port from 0 to 65535");
  auto c = parseTasksJson(R"({"worker": ["node1:0", "[::1]", "[::1]:2222", "node2"]})", 0);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(ranks(*c), "worker0 node1 0, worker1 [::1] 0, worker2 [::1] 0, worker3 node2 0");
}
