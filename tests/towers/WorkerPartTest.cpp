//===- WorkerPartTest.cpp - One worker's part of a multi-worker plan ---------===//
//
// selectWorkerPart (passes/WorkerPart.h): what a worker keeps of a plan of
// towers over W workers (alike or not), and that the workers, each running its part on its rows of
// the batch and summing across workers, train like the whole plan in one process. The workers here
// are threads joined by an in-process stand-in for MPI (tests/mpi runs the real processes under
// mpirun).
//
//===----------------------------------------------------------------------===//

#include "TowerTestUtil.h"

#include "executor/Collectives.h"
#include "ir/Clone.h"
#include "ir/Verifier.h"
#include "passes/WorkerPart.h"

#include <condition_variable>
#include <mutex>
#include <numeric>
#include <thread>

using namespace graphc;
using namespace graphc::towertest;

namespace {

/// Sums across worker threads: every worker's call for a group waits until
/// all have added their tensors, then takes the sum.
class ThreadWorkers : public CrossWorkerReducer {
public:
  explicit ThreadWorkers(unsigned n) : n_(n) {}
  unsigned numWorkers() const override { return n_; }
  llvm::Error prepareGroups(llvm::ArrayRef<std::string>) override { return llvm::Error::success(); }
  llvm::Error allReduceSum(llvm::StringRef group, llvm::ArrayRef<TensorView> tensors,
                           llvm::StringRef) override {
    std::unique_lock<std::mutex> lock(mutex_);
    Slot &s = slots_[group.str()];
    uint64_t generation = s.generation;
    if (s.arrived == 0)
      s.sum.assign(tensors.size(), {});
    for (size_t t = 0; t < tensors.size(); ++t) {
      std::vector<float> &acc = s.sum[t];
      acc.resize(tensors[t].numElements(), 0.0f);
      for (size_t i = 0; i < acc.size(); ++i)
        acc[i] += tensors[t].as<float>()[i];
    }
    if (++s.arrived == n_) {
      s.result = std::move(s.sum);
      s.sum.clear();
      s.arrived = 0;
      ++s.generation;
      cv_.notify_all();
    } else if (!cv_.wait_for(lock, std::chrono::seconds(60),
                             [&] { return s.generation != generation; })) {
      return makeError("group '" + group + "' timed out");
    }
    for (size_t t = 0; t < tensors.size(); ++t)
      std::copy(s.result[t].begin(), s.result[t].end(), tensors[t].as<float>());
    return llvm::Error::success();
  }

private:
  struct Slot {
    unsigned arrived = 0;
    uint64_t generation = 0;
    std::vector<std::vector<float>> sum, result;
  };
  unsigned n_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, Slot> slots_;
};

/// Dropout masks follow (seed, tower), so they match anyway; without dropout
/// the small CNN's five steps stay well conditioned (as in EquivalenceTest).
models::ModelOptions optionsFor(const std::string &model) {
  models::ModelOptions o;
  if (model == "small_cnn")
    o.dropout = 0;
  return o;
}

/// The plan of workers with `towers[w]` towers each, compiled and placed on
/// gpu:t.
std::unique_ptr<Module> plan(const std::string &model, int64_t batch, const Ints &towers,
                             const std::string &params, const std::string &bn = "local") {
  auto m = buildOrFail(model, optionsFor(model));
  if (!m)
    return nullptr;
  CompileOptions o;
  o.batch = batch;
  o.towers = (int)std::accumulate(towers.begin(), towers.end(), int64_t(0));
  o.params = cantFail(parseParamPlacement(params));
  o.bn = cantFail(parseBnMode(bn));
  o.momentum = 0.9;
  o.bucketBytes = 64 << 10;
  if (auto e = compileTowers(*m, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  m->plan().workers = (int64_t)towers.size();
  m->plan().workerTowers = towers;
  return m;
}

TEST(WorkerPart, KeepsTheWorkersTowersAndSumsAcrossWorkers) {
  for (const char *params : {"cpu", "mirrored"}) {
    SCOPED_TRACE(params);
    // 10 samples over 4 towers: 3, 3, 2, 2; worker 1 holds towers 2 and 3.
    auto m = plan("mlp", 10, {2, 2}, params);
    ASSERT_TRUE(m);
    auto slice = workerSlice(*m, 1);
    ASSERT_TRUE(bool(slice)) << llvm::toString(slice.takeError());
    EXPECT_EQ(slice->offset, 6);
    EXPECT_EQ(slice->count, 4);
    llvm::Error err = selectWorkerPart(*m, 1);
    ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
    ASSERT_FALSE(bool(verify(*m)));
    EXPECT_EQ(m->plan().worker, 1);
    EXPECT_EQ(m->plan().workerOffset, 6);
    EXPECT_EQ(m->plan().batch, 4);
    EXPECT_EQ(m->plan().globalBatch, 10);
    EXPECT_EQ(m->plan().towers, 2);
    EXPECT_EQ(m->plan().towerBatches, (Ints{2, 2}));
    EXPECT_EQ(m->main().findInput("input")->result()->type().shape[0], 4);
    unsigned acrossWorkers = 0;
    for (const Node *n : m->main().nodes()) {
      EXPECT_TRUE(n->tower() < 0 || n->tower() == 2 || n->tower() == 3) << n->name();
      for (std::optional<DeviceId> d : {n->requestedDevice(), n->assignedDevice()})
        EXPECT_TRUE(!d || d == DeviceId::host() || d == DeviceId::gpu(0) || d == DeviceId::gpu(1))
            << n->name();
      if (n->op() == Op::AllReduce) {
        EXPECT_EQ(n->attrs().getInt("workers"), 2) << n->name();
        ++acrossWorkers;
        if (n->tower() >= 0) { // a mirrored bucket: ranks among the worker's towers
          EXPECT_EQ(n->attrs().getInt("nranks"), 2);
          EXPECT_EQ(n->attrs().getInt("rank"), n->tower() - 2);
        }
      }
    }
    // The loss's sum, and the gradient sums (cpu) or buckets (mirrored).
    EXPECT_GE(acrossWorkers, 2u);
    for (const Variable &v : m->variables())
      for (DeviceId d : v.devices)
        EXPECT_TRUE(d == DeviceId::host() || d == DeviceId::gpu(0) || d == DeviceId::gpu(1))
            << v.name << " on " << d;
  }
}

TEST(WorkerPart, RefusesAWorkerWithoutSamples) {
  auto m = plan("mlp", 1, {1, 1}, "cpu");
  ASSERT_TRUE(m);
  llvm::Error err = selectWorkerPart(*m, 1);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("gives worker 1 of 2 no sample"),
            std::string::npos);
}

TEST(WorkerPart, RefusesVariablesOnOneGpu) {
  auto m = plan("mlp", 8, {1, 1}, "spread");
  ASSERT_TRUE(m);
  llvm::Error err = selectWorkerPart(*m, 0);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("not planned across workers yet"),
            std::string::npos);
}

TEST(WorkerPart, WorkersWithDifferentTowerCounts) {
  // 10 samples over 2 + 1 towers: 4, 3, 3; worker 1 holds tower 2 on gpu:2,
  // which becomes its gpu:0.
  auto m = plan("mlp", 10, {2, 1}, "mirrored");
  ASSERT_TRUE(m);
  auto first = workerSlice(*m, 0);
  ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
  EXPECT_EQ(first->offset, 0);
  EXPECT_EQ(first->count, 7);
  llvm::Error err = selectWorkerPart(*m, 1);
  ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
  EXPECT_EQ(m->plan().workerOffset, 7);
  EXPECT_EQ(m->plan().batch, 3);
  EXPECT_EQ(m->plan().towers, 1);
  for (const Node *n : m->main().nodes()) {
    EXPECT_TRUE(n->tower() < 0 || n->tower() == 2) << n->name();
    EXPECT_TRUE(!n->assignedDevice() || n->assignedDevice() == DeviceId::host() ||
                n->assignedDevice() == DeviceId::gpu(0))
        << n->name() << " on " << deviceText(n->assignedDevice());
  }
  // Tower counts that do not add up to the plan's towers are refused.
  auto bad = plan("mlp", 10, {2, 1}, "cpu");
  ASSERT_TRUE(bad);
  bad->plan().workerTowers = Ints{1, 1};
  err = selectWorkerPart(*bad, 0);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("planned for 2 workers (towers 1, 1) but has 3"),
            std::string::npos);
}

struct Case {
  std::string model;
  int64_t batch;
  Ints towers; ///< per worker
  std::string params, bn = "local";
};

std::string joined(const Ints &v, llvm::StringRef separator) {
  return llvm::join(llvm::map_range(v, [](int64_t t) { return std::to_string(t); }), separator);
}

void PrintTo(const Case &c, std::ostream *os) {
  *os << c.model << " batch " << c.batch << ", workers with " << joined(c.towers, "+")
      << " towers, params " << c.params << ", bn " << c.bn;
}

class WorkersTrain : public testing::TestWithParam<Case> {};

// Five momentum steps: the workers' parts, summed across workers, end with
// the variables of the whole plan run in one process.
TEST_P(WorkersTrain, LikeTheWholePlanInOneProcess) {
  const Case &c = GetParam();
  const unsigned workers = (unsigned)c.towers.size();
  auto whole = plan(c.model, c.batch, c.towers, c.params, c.bn);
  ASSERT_TRUE(whole);
  Batch b = randomBatch(whole->main().findInput("input")->result()->type(), 10, 42);
  std::unique_ptr<Module> oneProcess = cloneModule(*whole);
  oneProcess->plan().workers.reset();
  auto ex = makeExecutor(*oneProcess);
  ASSERT_TRUE(ex);
  auto out = train(*ex, b, 5, 0.02f);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  auto want = variables(*ex);

  ThreadWorkers across(workers);
  std::vector<std::unique_ptr<Module>> parts;
  std::vector<Batch> rows;
  for (unsigned w = 0; w < workers; ++w) {
    parts.push_back(cloneModule(*whole));
    auto slice = workerSlice(*parts.back(), w);
    ASSERT_TRUE(bool(slice)) << llvm::toString(slice.takeError());
    llvm::Error err = selectWorkerPart(*parts.back(), w);
    ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
    auto cut = [&](const Tensor &t) {
      TensorType type = t.type();
      int64_t rowBytes = (int64_t)t.bytes() / type.shape[0];
      type.shape[0] = slice->count;
      Tensor part(type);
      std::memcpy(part.raw(), (const char *)t.raw() + slice->offset * rowBytes,
                  slice->count * rowBytes);
      return part;
    };
    rows.push_back({cut(b.x), cut(b.labels)});
  }
  std::vector<std::map<std::string, Tensor>> got(workers);
  std::vector<std::string> errors(workers);
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      ExecutorOptions eo;
      eo.threads = 1;
      eo.seed = 7;
      eo.deviceMap = emulate;
      eo.acrossWorkers = &across;
      auto e = Executor::create(*parts[w], eo);
      if (!e) {
        errors[w] = llvm::toString(e.takeError());
        return;
      }
      auto r = train(**e, rows[w], 5, 0.02f);
      if (!r) {
        errors[w] = llvm::toString(r.takeError());
        return;
      }
      got[w] = variables(**e);
    });
  for (std::thread &t : threads)
    t.join();
  // The workers add their parts in the order they arrive, not one process's
  // rank order: the rounding bound of the step's longest sum
  // (tests/common/SumBound.h).
  // Workers of 2 and 1 towers add (g0 + g1) + g2 as one process does, in
  // either order of arrival: the same bits.
  const double rel = stepBound(c.model, optionsFor(c.model), c.batch);
  const bool sameGrouping = c.towers == Ints{2, 1};
  for (unsigned w = 0; w < workers; ++w) {
    ASSERT_EQ(errors[w], "") << "worker " << w;
    std::string what = testing::PrintToString(c) + ", worker " + std::to_string(w);
    if (sameGrouping)
      expectSameBits(got[w], want, what);
    else
      expectWithinBound(got[w], want, rel, what);
  }
}

std::vector<Case> cases() {
  return {
      {"mlp", 10, {2, 2}, "mirrored"},
      {"mlp", 10, {2, 2}, "cpu"},
      {"mlp", 10, {1, 1, 1, 1}, "cpu"},
      {"mlp", 10, {1, 1, 1}, "mirrored"}, // parts 4, 3, 3
      {"mlp", 10, {2, 1}, "mirrored"},    // parts 7, 3
      {"mlp", 9, {1, 3}, "cpu"},          // parts 3, 6
      {"small_cnn", 10, {2, 2}, "mirrored", "sync"},
      {"small_cnn", 7, {1, 1, 1}, "cpu", "sync"},
      {"small_cnn", 8, {2, 2}, "cpu", "frozen"},
      {"small_cnn", 10, {1, 2}, "mirrored", "sync"},
  };
}

std::string caseName(const testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  return c.model + "_B" + std::to_string(c.batch) + "_T" + joined(c.towers, "_") + "_" + c.params +
         "_" + c.bn;
}

INSTANTIATE_TEST_SUITE_P(Workers, WorkersTrain, testing::ValuesIn(cases()), caseName);

} // namespace
