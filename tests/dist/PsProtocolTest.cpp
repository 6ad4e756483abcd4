//===- PsProtocolTest.cpp - The parameter-server protocol between threads -===//
//
// executor/dist/PsClient.h and PsServer.h over a world whose ranks are
// threads of this process (InProcessMessages.h), without mpirun: workers
// train their parts of an mlp plan and exchange their sums for the tasks'
// variables after every step, the chief asks for the tasks' state in the
// middle of the run and for the final state at its end, and the tasks serve
// until every worker is done. Synchronous rounds end with the whole plan's
// variables in one process; asynchronous updates are each applied as they
// come and reach the chief's final state; a silent worker fails the task
// with an error that names it, unless it said it would be away. (tests/mpi runs the same protocol over MPI
// through graphrun.)
//
//===----------------------------------------------------------------------===//

#include "InProcessMessages.h"
#include "TowerTestUtil.h"

#include "executor/dist/PsClient.h"
#include "executor/dist/PsServer.h"
#include "ir/Clone.h"
#include "passes/PsPart.h"
#include "passes/WorkerPart.h"

#include <cstring>
#include <optional>
#include <thread>

using namespace graphc;
using namespace graphc::disttest;
using namespace graphc::towertest;
using namespace std::chrono_literals;

namespace {

constexpr float kLr = 0.02f;

/// An mlp plan of `workers` host towers (one each) and `tasks` ps tasks,
/// cut asynchronously so that a worker's part needs no collective across
/// workers and runs alone on its thread; the servers decide whether the
/// updates are synchronous.
std::unique_ptr<Module> plan(int64_t batch, unsigned workers, unsigned tasks) {
  auto m = buildOrFail("mlp", {});
  if (!m)
    return nullptr;
  CompileOptions o;
  o.batch = batch;
  o.towers = (int)workers;
  o.params = cantFail(parseParamPlacement("cpu"));
  o.momentum = 0.9;
  if (auto e = compileTowers(*m, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  m->plan().workers = (int64_t)workers;
  if (auto e = shardOverPs(*m, tasks, /*async=*/true)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  return m;
}

/// The rows of `b` that worker `w` trains on.
Batch rowsOf(const Module &whole, unsigned w, const Batch &b) {
  auto slice = cantFail(workerSlice(whole, w));
  auto cut = [&](const Tensor &t) {
    TensorType type = t.type();
    int64_t rowBytes = (int64_t)t.bytes() / type.shape[0];
    type.shape[0] = slice.count;
    Tensor out(type);
    std::memcpy(out.raw(), (const char *)t.raw() + slice.offset * rowBytes, slice.count * rowBytes);
    return out;
  };
  return {cut(b.x), cut(b.labels)};
}

/// One rank's thread: its error, if any.
std::string errorOf(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "";
}

/// The world's parts: every worker's and task's module, routes and rows.
struct World {
  unsigned workers = 0, tasks = 0;
  std::vector<std::unique_ptr<Module>> workerParts, taskParts;
  std::vector<std::vector<PsRoute>> workerRoutes, taskRoutes;
  std::vector<Batch> rows;
  std::vector<double> scales; ///< global batch over each worker's samples
};

void cut(const Module &whole, const Batch &b, World &world) {
  world.workers = planWorkers(whole);
  world.tasks = planPsTasks(whole);
  for (unsigned w = 0; w < world.workers; ++w) {
    auto part = cloneModule(whole);
    ASSERT_EQ(errorOf(selectWorkerPart(*part, w)), "");
    auto routes = selectPsWorkerPart(*part);
    ASSERT_TRUE(bool(routes)) << llvm::toString(routes.takeError());
    world.workerRoutes.push_back(std::move(*routes));
    world.workerParts.push_back(std::move(part));
    world.rows.push_back(rowsOf(whole, w, b));
    world.scales.push_back((double)*whole.batch() / (double)world.rows.back().x.type().shape[0]);
  }
  for (unsigned p = 0; p < world.tasks; ++p) {
    auto part = cloneModule(whole);
    auto routes = selectPsTaskPart(*part, p);
    ASSERT_TRUE(bool(routes)) << llvm::toString(routes.takeError());
    world.taskRoutes.push_back(std::move(*routes));
    world.taskParts.push_back(std::move(part));
  }
}

/// The mlp plan of `workers` workers and `tasks` ps tasks at batch 10, cut
/// into `world` with one random batch.
void cutPlan(unsigned workers, unsigned tasks, World &world) {
  auto whole = plan(10, workers, tasks);
  ASSERT_TRUE(whole);
  Batch b = randomBatch(whole->main().findInput("input")->result()->type(), 10, 42);
  ASSERT_NO_FATAL_FAILURE(cut(*whole, b, world));
}

/// What each rank saw.
struct Outcome {
  std::vector<std::string> workerErrors, taskErrors;
  std::vector<PsTaskStats> served;     ///< by task, from serve()
  std::vector<PsTaskStats> chiefStats; ///< by task, from the chief's finish()
  std::vector<uint64_t> lastStaleness; ///< by worker
  std::map<std::string, Tensor> chiefAfterFirst;
  std::vector<NamedTensor> midState, finalState;
  std::vector<std::map<std::string, Tensor>> workerVariables, taskState;
};

/// Every worker and task ended without an error.
void expectNoErrors(const Outcome &out) {
  for (const std::string &e : out.workerErrors)
    ASSERT_EQ(e, "");
  for (const std::string &e : out.taskErrors)
    ASSERT_EQ(e, "");
}

/// The chief's pause after its first step (as for an evaluation), said to
/// the tasks beforehand (PsClient::away) or not.
struct ChiefPause {
  std::chrono::milliseconds length{0};
  bool announced = false;
};

/// Runs the protocol: every task serves on a thread, every worker but
/// `silent` trains `steps` steps on a thread and exchanges after each; the
/// chief (worker 0) asks for the tasks' state after its first step, pauses,
/// and asks for the final state at the end.
Outcome run(World &world, bool async, int steps, std::chrono::milliseconds timeout,
            std::optional<unsigned> silent = std::nullopt, ChiefPause pause = {}) {
  const unsigned W = world.workers, P = world.tasks;
  InProcessMessages hub(W, P, timeout);
  Outcome out;
  out.workerErrors.resize(W);
  out.taskErrors.resize(P);
  out.served.resize(P);
  out.lastStaleness.resize(W);
  std::vector<std::unique_ptr<PsServer>> servers;
  for (unsigned p = 0; p < P; ++p) {
    ExecutorOptions eo;
    eo.threads = 1;
    eo.seed = 7;
    PsServer::Options o;
    o.async = async;
    if (async)
      o.workerScale = world.scales;
    auto s = PsServer::create(hub.channel(W + p), *world.taskParts[p], p,
                              PsLayout(world.taskRoutes[p], P), eo, o);
    if (!s) {
      ADD_FAILURE() << llvm::toString(s.takeError());
      return out;
    }
    servers.push_back(std::move(*s));
  }
  std::vector<std::unique_ptr<Executor>> executors;
  for (unsigned w = 0; w < W; ++w) {
    executors.push_back(makeExecutor(*world.workerParts[w]));
    if (!executors.back())
      return out;
  }
  auto worker = [&](unsigned w) {
    PsClient client(hub.channel(w), PsLayout(world.workerRoutes[w], P));
    Executor &ex = *executors[w];
    for (int step = 0; step < steps; ++step) {
      auto outs = train(ex, world.rows[w], 1, kLr);
      if (!outs) {
        out.workerErrors[w] = llvm::toString(outs.takeError());
        return;
      }
      auto staleness = client.exchange(step, kLr, *outs, ex);
      if (!staleness) {
        out.workerErrors[w] = llvm::toString(staleness.takeError());
        return;
      }
      out.lastStaleness[w] = *staleness;
      if (w == 0 && step == 0) {
        out.chiefAfterFirst = variables(ex);
        auto state = client.state();
        if (!state) {
          out.workerErrors[w] = llvm::toString(state.takeError());
          return;
        }
        out.midState = std::move(*state);
        if (pause.announced)
          if (auto e = client.away()) {
            out.workerErrors[w] = llvm::toString(std::move(e));
            return;
          }
        std::this_thread::sleep_for(pause.length);
      }
    }
    out.workerErrors[w] = errorOf(w == 0 ? client.finish(true, &out.finalState, &out.chiefStats)
                                         : client.finish(false));
  };
  std::vector<std::thread> threads;
  for (unsigned p = 0; p < P; ++p)
    threads.emplace_back([&, p] {
      auto stats = servers[p]->serve();
      if (stats)
        out.served[p] = *stats;
      else
        out.taskErrors[p] = llvm::toString(stats.takeError());
    });
  for (unsigned w = 0; w < W; ++w)
    if (w != silent)
      threads.emplace_back(worker, w);
  for (auto &t : threads)
    t.join();
  for (auto &ex : executors)
    out.workerVariables.push_back(variables(*ex));
  for (auto &s : servers)
    out.taskState.push_back(variables(s->executor()));
  return out;
}

std::map<std::string, Tensor> byName(const std::vector<NamedTensor> &tensors) {
  std::map<std::string, Tensor> m;
  for (const NamedTensor &t : tensors)
    m[t.name] = t.tensor;
  return m;
}

/// Each tensor of `got` that `want` also names has its bits; returns how
/// many were compared.
size_t expectSharedBits(const std::map<std::string, Tensor> &got,
                        const std::map<std::string, Tensor> &want, const std::string &what) {
  size_t compared = 0;
  for (const auto &[name, value] : got)
    if (auto it = want.find(name); it != want.end()) {
      EXPECT_TRUE(sumbound::sameBits(value, it->second)) << what << ": '" << name << "'";
      ++compared;
    }
  return compared;
}

/// Every task's variables and slots, by name.
std::map<std::string, Tensor> tasksState(const Outcome &out) {
  std::map<std::string, Tensor> m;
  for (const auto &task : out.taskState)
    m.insert(task.begin(), task.end());
  return m;
}

TEST(PsProtocol, SynchronousRoundsEndWithTheWholePlansVariables) {
  auto whole = plan(10, 2, 2);
  ASSERT_TRUE(whole);
  Batch b = randomBatch(whole->main().findInput("input")->result()->type(), 10, 42);
  auto oneProcess = cloneModule(*whole);
  auto single = makeExecutor(*oneProcess);
  ASSERT_TRUE(single);
  ASSERT_TRUE(bool(train(*single, b, 3, kLr)));
  World world;
  ASSERT_NO_FATAL_FAILURE(cut(*whole, b, world));

  Outcome out = run(world, /*async=*/false, 3, 30s);
  ASSERT_NO_FATAL_FAILURE(expectNoErrors(out));
  // One update per step, none stale; the chief hears the same statistics.
  ASSERT_EQ(out.chiefStats.size(), 2u);
  for (unsigned p = 0; p < 2; ++p) {
    EXPECT_EQ(out.served[p].updates, 3u);
    EXPECT_EQ(out.served[p].maxStaleness, 0u);
    EXPECT_EQ(out.chiefStats[p].updates, 3u);
  }
  // The final state is what the tasks hold, bit for bit, and every worker
  // read the last update's variables.
  const auto held = tasksState(out);
  expectSameBits(byName(out.finalState), held, "the final state");
  for (unsigned w = 0; w < 2; ++w)
    EXPECT_EQ(expectSharedBits(out.workerVariables[w], held, "worker " + std::to_string(w)), 6u);
  // The state asked for after the first step holds the variables the chief
  // read back from it (and their slots).
  EXPECT_EQ(out.midState.size(), 12u);
  EXPECT_EQ(expectSharedBits(byName(out.midState), out.chiefAfterFirst, "the state after step 0"),
            6u);
  // The tasks added the workers' sums in rank order: the whole plan's step,
  // its sums grouped by worker (tests/common/SumBound.h).
  auto want = variables(*single);
  auto got = held;
  for (const auto &[name, value] : out.workerVariables[0])
    got.emplace(name, value);
  expectWithinBound(got, want, stepBound("mlp", {}, 10), "2 workers, 2 ps tasks");
}

TEST(PsProtocol, AsynchronousUpdatesReachTheChiefsFinalState) {
  World world;
  ASSERT_NO_FATAL_FAILURE(cutPlan(3, 2, world));

  Outcome out = run(world, /*async=*/true, 3, 30s);
  ASSERT_NO_FATAL_FAILURE(expectNoErrors(out));
  // Every worker's every step is one update of each task; an update can be
  // stale by at most the other workers' updates.
  ASSERT_EQ(out.chiefStats.size(), 2u);
  for (unsigned p = 0; p < 2; ++p) {
    EXPECT_EQ(out.served[p].updates, 9u);
    EXPECT_LE(out.served[p].maxStaleness, 6u);
    EXPECT_LE(out.served[p].meanStaleness, (double)out.served[p].maxStaleness);
    EXPECT_EQ(out.chiefStats[p].updates, 9u);
    EXPECT_EQ(out.chiefStats[p].maxStaleness, out.served[p].maxStaleness);
  }
  for (unsigned w = 0; w < 3; ++w)
    EXPECT_LE(out.lastStaleness[w], 6u);
  // The chief's final state comes after every worker's last update.
  expectSameBits(byName(out.finalState), tasksState(out), "the final state");
}

TEST(PsProtocol, ASilentWorkerFailsTheTaskNamingIt) {
  World world;
  ASSERT_NO_FATAL_FAILURE(cutPlan(2, 1, world));

  Outcome out = run(world, /*async=*/false, 2, 1s, /*silent=*/1u);
  // (A loaded machine may also find worker 0 silent when the time is up:
  // then the error names both.)
  const std::string &task = out.taskErrors[0];
  EXPECT_NE(task.find("ps task 0 (rank 2) waiting for the gradients of "), std::string::npos)
      << task;
  EXPECT_NE(task.find("worker 1 (nothing heard yet)"), std::string::npos) << task;
  // The worker that did send waits for variables that never come.
  EXPECT_NE(out.workerErrors[0].find("sending the step's gradients to the ps tasks"),
            std::string::npos)
      << out.workerErrors[0];
}

TEST(PsProtocol, AWorkerAwayIsNoStall) {
  // The chief evaluates for longer than the timeout while another worker
  // trains on (--ps-async): said beforehand, that is no stall.
  World world;
  ASSERT_NO_FATAL_FAILURE(cutPlan(2, 1, world));

  Outcome away = run(world, /*async=*/true, 3, 1s, std::nullopt, {2500ms, /*announced=*/true});
  ASSERT_NO_FATAL_FAILURE(expectNoErrors(away));
  EXPECT_EQ(away.served[0].updates, 6u);
  // Unsaid, the same pause is a stall that names the chief.
  Outcome silent = run(world, /*async=*/true, 3, 1s, std::nullopt, {2500ms, /*announced=*/false});
  EXPECT_NE(silent.taskErrors[0].find("worker 0 (last heard after step 0)"), std::string::npos)
      << silent.taskErrors[0];
}

} // namespace
