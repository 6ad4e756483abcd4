#include "tools/driver/PsTask.h"

#include "executor/dist/PsServer.h"
#include "ir/Diagnostics.h"
#include "ir/Verifier.h"
#include "passes/PsPart.h"
#include "passes/WorkerPart.h"

#include "llvm/ADT/StringSet.h"

namespace graphc {

namespace {

/// Asynchronous updates: each worker's sums, weighted by the global batch,
/// become the mean over its own samples.
llvm::Expected<std::vector<double>> workerScales(const Module &plan, unsigned workers) {
  if (workers == 1)
    return std::vector<double>{1.0};
  std::vector<double> scales;
  const double global = (double)plan.batch().value_or(0);
  for (unsigned w = 0; w < workers; ++w) {
    auto s = workerSlice(plan, w);
    if (!s)
      return s.takeError();
    scales.push_back(global / (double)s->count);
  }
  return scales;
}

} // namespace

llvm::Error runPsTask(const TrainOptions &opts, Module &plan,
                      const std::optional<LoadedCheckpoint> &ckpt, Workers &workers) {
  const unsigned task = workers.rank() - workers.numWorkers();
  if (ckpt)
    if (auto e = checkFits(*ckpt, plan))
      return e;
  PsServer::Options o;
  o.async = planPsAsync(plan);
  if (o.async) {
    auto scales = workerScales(plan, workers.numWorkers());
    if (!scales)
      return scales.takeError();
    o.workerScale = std::move(*scales);
  }
  auto routes = selectPsTaskPart(plan, task);
  if (!routes)
    return routes.takeError();
  if (auto e = verify(plan))
    return withContext(std::move(e), "ps task " + llvm::Twine(task) + "'s part of the plan");
  ExecutorOptions exec = opts.executor;
  exec.profile = false;
  exec.deviceMap = nullptr;
  exec.acrossWorkers = nullptr;
  auto server = PsServer::create(workers.messages(), plan, task,
                                 PsLayout(std::move(*routes), planPsTasks(plan)), exec, o);
  if (!server)
    return server.takeError();
  if (ckpt)
    if (auto e = restorePartInto(*ckpt, (*server)->executor()))
      return e;
  auto stats = (*server)->serve();
  if (!stats)
    return stats.takeError();
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<PsWorker>> PsWorker::create(Module &plan, Workers &workers) {
  auto layout = std::make_unique<Module>(plan.name());
  for (const Variable &v : plan.variables()) {
    Variable kept = v;
    kept.data = Tensor();
    kept.devices.clear();
    layout->addVariable(std::move(kept));
  }
  auto shards = psShards(plan);
  if (!shards)
    return shards.takeError();
  const bool async = planPsAsync(plan);
  auto routes = selectPsWorkerPart(plan);
  if (!routes)
    return routes.takeError();
  if (auto e = verify(plan))
    return withContext(std::move(e), "the worker's part of the plan");
  std::unique_ptr<PsWorker> w(new PsWorker(workers, PsLayout(std::move(*routes), shards->tasks)));
  w->layout_ = std::move(layout);
  w->async_ = async;
  w->taskBytes_ = shards->taskBytes;
  return w;
}

llvm::Expected<std::vector<NamedTensor>> PsWorker::checkpointTensors(const Executor &ex) {
  std::vector<NamedTensor> tensors;
  if (finished_) {
    tensors = final_;
  } else {
    auto state = client_.state();
    if (!state)
      return state.takeError();
    tensors = std::move(*state);
  }
  llvm::StringSet<> held;
  for (const NamedTensor &t : tensors)
    held.insert(t.name);
  // What no task holds (variables never updated) is the same on every worker.
  for (const Variable &v : layout_->variables())
    if (v.persistent() && !held.count(v.name)) {
      auto t = ex.readVariable(v.name);
      if (!t)
        return t.takeError();
      tensors.push_back({v.name, std::move(*t)});
    }
  return tensors;
}

llvm::Error PsWorker::finish(Executor &ex) {
  if (finished_)
    return llvm::Error::success();
  finished_ = true;
  if (!workers_.chief())
    return client_.finish(/*final=*/false);
  if (auto e = client_.finish(/*final=*/true, &final_, &stats_))
    return e;
  // Asynchronous runs: the other workers' last updates came after this
  // worker's last read.
  llvm::StringSet<> held;
  for (const std::string &name : ex.variableNames())
    held.insert(name);
  for (const NamedTensor &t : final_)
    if (held.count(t.name))
      if (auto e = ex.writeVariable(t.name, t.tensor))
        return e;
  return llvm::Error::success();
}

} // namespace graphc
