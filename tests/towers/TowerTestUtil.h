//===- TowerTestUtil.h - Compiling and training towers in tests -*- C++ -*-===//
//
// The tower tests compile a model with the tower pipeline, place it with a
// stand-in for the placer (assigned = requested, unrequested nodes on the
// host), add Transfer nodes with insert-transfers, and run it on the executor
// with every GPU emulated by a CPU device (gpu:t -> cpu:t+1), so each tower
// has its own worker and collectives really rendezvous. Training is momentum
// SGD on a fixed random batch; results are every variable after the steps.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ExecutorVariables.h"
#include "SumBound.h"
#include "executor/Executor.h"
#include "frontend/models/Models.h"
#include "ir/Cost.h"
#include "ir/Diagnostics.h"
#include "ir/Random.h"
#include "passes/Pass.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace graphc::towertest {

inline const char *const kSingleDevicePipeline =
    "bind-batch,training-mode,add-loss,mixed-precision,autodiff,add-optimizer,dce,verify";
/// The default training pipeline up to (and without) placement.
inline const char *const kTowerPipeline =
    "bind-batch,training-mode,add-loss,autodiff,add-optimizer,replicate-towers,split-batch,"
    "concat-outputs,aggregate-gradients,dce,verify";

inline llvm::Error runPipeline(Module &m, llvm::StringRef pipeline, const CompileOptions &o) {
  PassManager pm(o);
  if (auto e = pm.addPipeline(pipeline))
    return e;
  return pm.run(m);
}

/// The placer's stand-in: every node runs where it asked to, or on the host.
inline void assignRequested(Module &m) {
  for (Graph *g : m.graphs())
    for (Node *n : g->nodes())
      n->setAssignedDevice(n->requestedDevice().value_or(DeviceId::host()));
}

/// gpu:t runs on the emulated CPU device cpu:(t+1).
inline DeviceId emulate(DeviceId device) {
  return device.isGpu() ? DeviceId::cpu(device.index + 1) : device;
}

/// Compiles `m` in place: the tower pipeline, placement, transfers.
inline llvm::Error compileTowers(Module &m, const CompileOptions &o) {
  if (auto e = runPipeline(m, kTowerPipeline, o))
    return e;
  assignRequested(m);
  return runPipeline(m, "insert-transfers,verify", o);
}

inline std::unique_ptr<Executor> makeExecutor(const Module &m, uint64_t seed = 7,
                                              bool fuseUpdates = true, bool blockedLayouts = true) {
  ExecutorOptions eo;
  eo.fuseUpdates = fuseUpdates;
  eo.blockedLayouts = blockedLayouts;
  eo.threads = 2;
  eo.seed = seed;
  eo.deviceMap = emulate;
  eo.waitTimeout = std::chrono::seconds(getenv("T_TIMEOUT") ? atoi(getenv("T_TIMEOUT")) : 60);
  auto ex = Executor::create(m, std::move(eo));
  if (!ex) {
    ADD_FAILURE() << llvm::toString(ex.takeError());
    return nullptr;
  }
  return std::move(*ex);
}

struct Batch {
  Tensor x, labels;
};

/// A deterministic batch for an input of type `x` (any batch) and `classes`.
inline Batch randomBatch(const TensorType &x, int64_t classes, uint64_t seed) {
  Batch b{Tensor(x), Tensor(TensorType(DType::I64, {x.shape[0]}))};
  RandomStream r(seed, 1);
  for (int64_t i = 0; i < b.x.numElements(); ++i)
    b.x.set(i, r.uniform() * 2 - 1);
  for (int64_t i = 0; i < x.shape[0]; ++i)
    b.labels.set(i, (double)(r.next() % (uint64_t)classes));
  return b;
}

/// The first `rows` samples of a batch.
inline Batch firstRows(const Batch &b, int64_t rows) {
  auto cut = [&](const Tensor &t) {
    TensorType type = t.type();
    int64_t rowBytes = (int64_t)t.bytes() / type.shape[0];
    type.shape[0] = rows;
    Tensor out(type);
    if (out.bytes())
      std::memcpy(out.raw(), t.raw(), (size_t)(rows * rowBytes));
    return out;
  };
  return {cut(b.x), cut(b.labels)};
}

/// Runs `steps` training steps on the same batch; returns the last outputs.
inline llvm::Expected<std::vector<Tensor>> train(Executor &ex, const Batch &b, int steps,
                                                 float lr = 0.1f) {
  llvm::StringMap<Tensor> feeds;
  feeds["input"] = b.x;
  feeds["labels"] = b.labels;
  feeds["lr"] = Tensor::scalar(lr);
  std::vector<Tensor> out;
  for (int s = 0; s < steps; ++s) {
    auto r = ex.run(feeds);
    if (!r)
      return r.takeError();
    out = std::move(*r);
  }
  return out;
}

/// |a - b| / |b| over the whole tensor (relative L2 distance).
inline double relativeL2(const Tensor &a, const Tensor &b) {
  double d = 0, n = 0;
  for (int64_t i = 0; i < b.numElements(); ++i) {
    d += (a.at(i) - b.at(i)) * (a.at(i) - b.at(i));
    n += b.at(i) * b.at(i);
  }
  return std::sqrt(d / std::max(n, 1e-30));
}

/// Every variable of `want` is in `got`, within `rel` of its largest value
/// (a bound of tests/common/SumBound.h: the runs group their sums otherwise);
/// prints the worst ratio to the bound under `what`.
inline void expectWithinBound(const std::map<std::string, Tensor> &got,
                              const std::map<std::string, Tensor> &want, double rel,
                              const std::string &what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (const auto &[name, value] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << what << ": variable '" << name << "' missing";
      continue;
    }
    worst = std::max(worst, sumbound::relativeError(it->second, value));
    EXPECT_TRUE(sumbound::within(it->second, value, rel)) << what << ": variable '" << name << "'";
  }
  sumbound::report(what, worst, rel);
}

/// Every variable of `want` is in `got` with the same bits (the runs group
/// every sum alike).
inline void expectSameBits(const std::map<std::string, Tensor> &got,
                           const std::map<std::string, Tensor> &want, const std::string &what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  for (const auto &[name, value] : want) {
    auto it = got.find(name);
    if (it == got.end())
      ADD_FAILURE() << what << ": variable '" << name << "' missing";
    else
      EXPECT_TRUE(sumbound::sameBits(it->second, value)) << what << ": variable '" << name << "'";
  }
}

inline std::unique_ptr<Module> buildOrFail(llvm::StringRef name, models::ModelOptions o) {
  auto m = models::buildModel(name, o);
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  return std::move(*m);
}

/// How far a run that groups the training step's sums otherwise (towers,
/// micro-batches, workers, another vector width) may drift from the
/// single-device graph: K·u of the longest sum of `model`'s step at `batch`
/// (ir/Cost.h, tests/common/SumBound.h).
inline double stepBound(llvm::StringRef model, models::ModelOptions mo, int64_t batch) {
  auto m = buildOrFail(model, mo);
  return m ? sumbound::bound(longestSum(m->main(), batch)) : 0;
}

/// A run of the single-device graph: its variables and last loss.
struct SingleDeviceRun {
  std::map<std::string, Tensor> variables;
  double loss = 0;
};

/// Builds `model`, compiles it for one device at `batch` (with `pipeline`)
/// and trains `steps` steps at `lr` on one random batch (10 classes, seed 42; executor seed 7,
/// 2 threads): the towers' reference. A failure is a test failure and an
/// empty result.
inline SingleDeviceRun trainSingleDevice(llvm::StringRef model, models::ModelOptions mo,
                                         int64_t batch, int steps, float lr,
                                         Precision precision = Precision::FP32,
                                         llvm::StringRef pipeline = kSingleDevicePipeline) {
  SingleDeviceRun result;
  auto m = buildOrFail(model, mo);
  if (!m)
    return result;
  CompileOptions o;
  o.batch = batch;
  o.precision = precision;
  if (auto e = runPipeline(*m, pipeline, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return result;
  }
  ExecutorOptions eo;
  eo.threads = 2;
  eo.seed = 7;
  auto ex = Executor::create(*m, eo);
  if (!ex) {
    ADD_FAILURE() << llvm::toString(ex.takeError());
    return result;
  }
  Batch b = randomBatch(m->main().findInput("input")->result()->type(), 10, 42);
  auto out = train(**ex, b, steps, lr);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return result;
  }
  result.variables = variables(**ex);
  result.loss = (*out)[0].at(0);
  return result;
}

} // namespace graphc::towertest
