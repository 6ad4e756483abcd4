//===- PsPartTest.cpp - Parameter-server tasks of a multi-worker plan --------===//
//
// passes/PsPart.h: how the variables are sharded over the ps tasks, what a
// worker and a task keep of the plan, and that the workers' sums applied by
// the tasks' parts (executor/dist/PsServer.h, PsServer::apply) give the
// update of the whole plan in one process, or, asynchronously, the update
// of the worker's own samples. The exchange itself runs between threads in
// tests/dist and under mpirun in tests/mpi; here the tasks' servers are
// driven directly.
//
//===----------------------------------------------------------------------===//

#include "TowerTestUtil.h"

#include "executor/dist/PsServer.h"
#include "executor/dist/WorldOfOne.h"
#include "ir/Clone.h"
#include "ir/Verifier.h"
#include "passes/PsPart.h"
#include "passes/WorkerPart.h"

#include <cstring>

using namespace graphc;
using namespace graphc::towertest;

namespace {

/// Without dropout the small CNN's steps stay well conditioned (as in
/// WorkerPartTest); mlp has none.
models::ModelOptions optionsFor(const std::string &model) {
  models::ModelOptions o;
  if (model == "small_cnn")
    o.dropout = 0;
  return o;
}

/// A plan of `workers` x `perWorker` host-placed towers (--params cpu).
std::unique_ptr<Module> plan(const std::string &model, int64_t batch, unsigned workers,
                             unsigned perWorker, unsigned ps, bool async,
                             const std::string &bn = "local", const std::string &params = "cpu") {
  auto m = buildOrFail(model, optionsFor(model));
  if (!m)
    return nullptr;
  CompileOptions o;
  o.batch = batch;
  o.towers = (int)(workers * perWorker);
  o.params = cantFail(parseParamPlacement(params));
  o.bn = cantFail(parseBnMode(bn));
  o.momentum = 0.9;
  if (auto e = compileTowers(*m, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  if (workers > 1)
    m->plan().workers = (int64_t)workers;
  if (auto e = shardOverPs(*m, ps, async)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  return m;
}

std::string errorOf(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "";
}
template <typename T> std::string errorOf(llvm::Expected<T> &v) {
  return v ? "" : llvm::toString(v.takeError());
}

TEST(PsPart, ShardsByBytesLargestFirstWithTheSlots) {
  auto m = plan("mlp", 8, 2, 1, 2, false);
  ASSERT_TRUE(m);
  EXPECT_EQ(planPsTasks(*m), 2u);
  EXPECT_FALSE(planPsAsync(*m));
  auto s = psShards(*m);
  ASSERT_TRUE(bool(s)) << errorOf(s);
  ASSERT_EQ(s->variables.size(), 6u);
  // fc1.weight (784x256) alone outweighs the rest: task 0 holds it, task 1
  // everything else, each variable with its momentum slot.
  std::map<std::string, unsigned> task;
  for (const PsRoute &r : s->variables) {
    task[r.var] = r.task;
    EXPECT_EQ(r.slots, std::vector<std::string>{r.var + ".momentum"}) << r.var;
  }
  EXPECT_EQ(task["fc1.weight"], 0u);
  for (const char *v : {"fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"})
    EXPECT_EQ(task[v], 1u) << v;
  EXPECT_EQ(s->taskBytes[0], 2 * 784 * 256 * 4);
  EXPECT_EQ(s->taskBytes[1], 2 * 4 * (256 + 256 * 256 + 256 + 10 * 256 + 10));
}

TEST(PsPart, RefusesWhatATaskCannotHold) {
  auto m = buildOrFail("mlp", optionsFor("mlp"));
  ASSERT_TRUE(m);
  CompileOptions o;
  o.batch = 8;
  o.towers = 2;
  o.params = cantFail(parseParamPlacement("mirrored"));
  ASSERT_EQ(errorOf(compileTowers(*m, o)), "");
  std::string err = errorOf(shardOverPs(*m, 2, false));
  EXPECT_NE(err.find("plan with --params cpu"), std::string::npos) << err;
  auto cpu = plan("mlp", 8, 2, 1, 1, false);
  ASSERT_TRUE(cpu);
  EXPECT_NE(errorOf(shardOverPs(*cpu, 0, false)).find("at least one"), std::string::npos);
  // A plan whose shards were edited: a variable the step updates left out.
  cpu->plan().psVariables = Strings{"fc1.weight"};
  cpu->plan().psOwners = Ints{0};
  auto s = psShards(*cpu);
  EXPECT_NE(errorOf(s).find("leave out 'fc1.bias', which the step updates"), std::string::npos);
  cpu->plan().psOwners = Ints{3};
  auto t = psShards(*cpu);
  EXPECT_NE(errorOf(t).find("give 'fc1.weight' to task 3 of 1"), std::string::npos);
}

TEST(PsPart, AsyncRefusesBatchNormSyncAcrossWorkers) {
  auto m = plan("small_cnn", 8, 2, 1, 1, true, "sync");
  ASSERT_TRUE(m);
  ASSERT_EQ(errorOf(selectWorkerPart(*m, 0)), "");
  auto r = selectPsWorkerPart(*m);
  EXPECT_NE(errorOf(r).find("use --bn local or frozen"), std::string::npos);
}

TEST(PsPart, WhatAWorkerAndATaskKeep) {
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    auto whole = plan("mlp", 10, 2, 2, 2, async);
    ASSERT_TRUE(whole);
    auto worker = cloneModule(*whole);
    ASSERT_EQ(errorOf(selectWorkerPart(*worker, 1)), "");
    auto routes = selectPsWorkerPart(*worker);
    ASSERT_TRUE(bool(routes)) << errorOf(routes);
    ASSERT_EQ(errorOf(verify(*worker)), "");
    ASSERT_EQ(routes->size(), 6u);
    unsigned acrossWorkers = 0;
    for (const Node *n : worker->main().nodes()) {
      EXPECT_FALSE(isVariableUpdate(n->op())) << n->name();
      acrossWorkers += n->op() == Op::AllReduce && n->attrs().has("workers");
    }
    // Synchronous workers still sum the loss; asynchronous ones share nothing.
    EXPECT_EQ(acrossWorkers, async ? 0u : 1u);
    for (const PsRoute &r : *routes) {
      const Value *out = worker->main().outputs()[r.output];
      EXPECT_EQ(out->type(), r.type) << r.var;
      EXPECT_EQ(out->producer()->op(), Op::AddN) << r.var; // the worker's sum over its towers
    }
    for (const Variable &v : worker->variables())
      EXPECT_NE(v.kind, VarKind::Slot) << v.name;

    auto task = cloneModule(*whole);
    auto mine = selectPsTaskPart(*task, 1);
    ASSERT_TRUE(bool(mine)) << errorOf(mine);
    ASSERT_EQ(errorOf(verify(*task)), "");
    EXPECT_EQ(mine->size(), 5u);
    EXPECT_EQ(task->variables().size(), 10u); // five variables and their slots
    EXPECT_EQ(task->findGraph("forward"), nullptr);
    for (const Node *n : task->main().nodes()) {
      EXPECT_TRUE(n->op() == Op::Input || n->op() == Op::ApplyMomentum) << n->name();
      EXPECT_EQ(n->assignedDevice(), DeviceId::host()) << n->name();
    }
  }
}

/// Runs a step of every worker's part (one after the other: no collective
/// across workers is left when asynchronous) and returns each one's outputs.
std::vector<std::vector<Tensor>> stepWorkers(std::vector<std::unique_ptr<Executor>> &workers,
                                             llvm::ArrayRef<Batch> rows, float lr) {
  std::vector<std::vector<Tensor>> outs;
  for (size_t w = 0; w < workers.size(); ++w) {
    auto o = train(*workers[w], rows[w], 1, lr);
    if (!o) {
      ADD_FAILURE() << llvm::toString(o.takeError());
      return {};
    }
    outs.push_back(std::move(*o));
  }
  return outs;
}

/// Packs a worker's sums for `task` as a request carries them.
std::vector<float> sumsFor(const PsLayout &layout, unsigned task, llvm::ArrayRef<Tensor> outs) {
  std::vector<float> packed;
  for (const PsRoute *r : layout.of(task)) {
    const float *p = outs[r->output].data<float>();
    packed.insert(packed.end(), p, p + r->type.numElements());
  }
  return packed;
}

struct PsRun {
  /// The servers are driven directly: they send no message.
  WorldOfOne alone;
  std::vector<std::unique_ptr<Module>> workerParts, taskParts;
  std::vector<std::unique_ptr<Executor>> workers;
  std::vector<std::unique_ptr<PsServer>> tasks;
  std::vector<Batch> rows;
  std::unique_ptr<PsLayout> layout;
};

/// The parts of `whole` (asynchronous cut, so that workers need no
/// collective), their executors and the tasks' servers.
void setUp(const Module &whole, const Batch &b, PsRun &run) {
  const unsigned W = planWorkers(whole), P = planPsTasks(whole);
  for (unsigned w = 0; w < W; ++w) {
    auto part = cloneModule(whole);
    auto slice = workerSlice(*part, w);
    ASSERT_TRUE(bool(slice)) << errorOf(slice);
    ASSERT_EQ(errorOf(selectWorkerPart(*part, w)), "");
    auto routes = selectPsWorkerPart(*part);
    ASSERT_TRUE(bool(routes)) << errorOf(routes);
    if (w == 0)
      run.layout = std::make_unique<PsLayout>(*routes, P);
    auto rows = [&](const Tensor &t) {
      TensorType type = t.type();
      int64_t rowBytes = (int64_t)t.bytes() / type.shape[0];
      type.shape[0] = slice->count;
      Tensor out(type);
      std::memcpy(out.raw(), (const char *)t.raw() + slice->offset * rowBytes,
                  slice->count * rowBytes);
      return out;
    };
    run.rows.push_back({rows(b.x), rows(b.labels)});
    run.workers.push_back(makeExecutor(*part));
    ASSERT_TRUE(run.workers.back());
    run.workerParts.push_back(std::move(part));
  }
  for (unsigned p = 0; p < P; ++p) {
    auto part = cloneModule(whole);
    auto routes = selectPsTaskPart(*part, p);
    ASSERT_TRUE(bool(routes)) << errorOf(routes);
    ExecutorOptions eo;
    eo.threads = 1;
    eo.seed = 7;
    auto server = PsServer::create(run.alone.messages(), *part, p, PsLayout(*routes, P), eo, {});
    ASSERT_TRUE(bool(server)) << errorOf(server);
    run.tasks.push_back(std::move(*server));
    run.taskParts.push_back(std::move(part));
  }
}

/// Writes each task's variables into every worker's replicas.
void sendVariables(PsRun &run) {
  for (unsigned p = 0; p < run.tasks.size(); ++p) {
    std::vector<float> values(run.layout->values(p));
    ASSERT_EQ(errorOf(run.tasks[p]->packVariables(values.data())), "");
    const float *from = values.data();
    for (const PsRoute *r : run.layout->of(p)) {
      Tensor t(r->type);
      std::memcpy(t.raw(), from, t.bytes());
      from += r->type.numElements();
      for (auto &ex : run.workers)
        ASSERT_EQ(errorOf(ex->writeVariable(r->var, t)), "");
    }
  }
}

/// The tasks' variables and slots, by name.
std::map<std::string, Tensor> taskState(PsRun &run) {
  std::map<std::string, Tensor> out;
  for (auto &t : run.tasks)
    for (auto &[name, value] : variables(t->executor()))
      out[name] = value;
  return out;
}

struct Case {
  std::string model;
  int64_t batch;
  unsigned workers, perWorker, ps;
  std::string bn = "local";
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << c.model << " batch " << c.batch << ", " << c.workers << " workers x " << c.perWorker
      << ", " << c.ps << " ps, bn " << c.bn;
}

class PsTrain : public testing::TestWithParam<Case> {};

// Five momentum steps: every step the tasks add the workers' sums in rank
// order and apply one update, and the workers read the result: the variables
// and slots end as the whole plan's in one process.
TEST_P(PsTrain, SynchronousLikeTheWholePlan) {
  const Case &c = GetParam();
  auto whole = plan(c.model, c.batch, c.workers, c.perWorker, c.ps, /*async=*/true, c.bn);
  ASSERT_TRUE(whole);
  Batch b = randomBatch(whole->main().findInput("input")->result()->type(), 10, 42);
  auto oneProcess = cloneModule(*whole);
  auto ex = makeExecutor(*oneProcess);
  ASSERT_TRUE(ex);
  ASSERT_TRUE(bool(train(*ex, b, 5, 0.02f)));
  auto want = variables(*ex);

  PsRun run;
  setUp(*whole, b, run);
  ASSERT_FALSE(testing::Test::HasFatalFailure());
  for (int step = 0; step < 5; ++step) {
    auto outs = stepWorkers(run.workers, run.rows, 0.02f);
    ASSERT_EQ(outs.size(), c.workers);
    for (unsigned p = 0; p < c.ps; ++p) {
      std::vector<std::vector<float>> sums;
      std::vector<const float *> parts;
      for (auto &o : outs)
        sums.push_back(sumsFor(*run.layout, p, o));
      for (auto &s : sums)
        parts.push_back(s.data());
      ASSERT_EQ(errorOf(run.tasks[p]->apply(parts, 1.0, step, 0.02)), "");
    }
    sendVariables(run);
  }
  auto got = taskState(run);
  // What the tasks do not hold (frozen statistics) the workers keep as is.
  for (auto &[name, value] : variables(*run.workers[0]))
    got.emplace(name, value);
  // Each worker sums its towers, the tasks add the workers' sums, and each
  // worker runs its towers on all the threads: the step's sums grouped
  // otherwise than in one process, within the rounding bound of the longest
  // (tests/common/SumBound.h).
  const double rel = stepBound(c.model, optionsFor(c.model), c.batch);
  const std::string what = c.model + " batch " + std::to_string(c.batch) + ", " +
                           std::to_string(c.workers) + " workers x " + std::to_string(c.perWorker) +
                           ", " + std::to_string(c.ps) + " ps";
  expectWithinBound(got, want, rel, what + ": tasks' state");
  for (unsigned w = 0; w < c.workers; ++w) {
    // A worker holds the variables without their optimizer slots.
    auto held = variables(*run.workers[w]);
    std::map<std::string, Tensor> wanted;
    for (const auto &[name, value] : held)
      wanted[name] = want[name];
    expectWithinBound(held, wanted, rel, what + ": worker " + std::to_string(w));
  }
}

std::vector<Case> cases() {
  return {
      {"mlp", 10, 2, 2, 2},
      {"mlp", 10, 3, 1, 1}, // parts 4, 3, 3
      {"small_cnn", 8, 2, 2, 2, "frozen"},
      {"small_cnn", 8, 2, 1, 3, "local"},
  };
}

std::string caseName(const testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  return c.model + "_B" + std::to_string(c.batch) + "_W" + std::to_string(c.workers) + "x" +
         std::to_string(c.perWorker) + "_P" + std::to_string(c.ps) + "_" + c.bn;
}

INSTANTIATE_TEST_SUITE_P(Ps, PsTrain, testing::ValuesIn(cases()), caseName);

// Asynchronous: one worker's sums, scaled by global batch / its samples, are
// the mean gradient of its own rows: the task's update equals one step of a
// single device on those rows alone.
TEST(PsPart, AnAsynchronousUpdateIsTheWorkersOwnMean) {
  auto whole = plan("mlp", 10, 3, 1, 2, /*async=*/true);
  ASSERT_TRUE(whole);
  Batch b = randomBatch(whole->main().findInput("input")->result()->type(), 10, 42);
  PsRun run;
  setUp(*whole, b, run);
  ASSERT_FALSE(testing::Test::HasFatalFailure());
  auto outs = stepWorkers(run.workers, run.rows, 0.02f);
  ASSERT_EQ(outs.size(), 3u);
  const unsigned w = 2; // rows 7..9: a part of 3
  auto slice = workerSlice(*whole, w);
  ASSERT_TRUE(bool(slice));
  ASSERT_EQ(slice->count, 3);
  for (unsigned p = 0; p < 2; ++p) {
    std::vector<float> sums = sumsFor(*run.layout, p, outs[w]);
    ASSERT_EQ(errorOf(run.tasks[p]->apply({sums.data()}, 10.0 / 3, 0, 0.02)), "");
  }
  auto single = buildOrFail("mlp", optionsFor("mlp"));
  ASSERT_TRUE(single);
  CompileOptions o;
  o.batch = 3;
  o.momentum = 0.9;
  ASSERT_EQ(errorOf(runPipeline(*single, kSingleDevicePipeline, o)), "");
  auto ex = makeExecutor(*single);
  ASSERT_TRUE(ex);
  ASSERT_TRUE(bool(train(*ex, run.rows[w], 1, 0.02f)));
  // The same sums as the single device's, scaled by 10/3 after dividing by
  // 10: a few roundings more, far inside the bound of the sums.
  expectWithinBound(taskState(run), variables(*ex), stepBound("mlp", optionsFor("mlp"), 3),
                    "worker 2's own update");
}

} // namespace
