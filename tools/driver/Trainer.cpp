#include "tools/driver/Trainer.h"

#include "tools/driver/Evaluator.h"
#include "tools/driver/TrainingData.h"
#include "tools/driver/TrainingSession.h"

namespace graphc {

llvm::Expected<EvalResult> runEvaluation(const Module &forward, llvm::StringRef data,
                                         bool testSplit, int64_t batch, const ExecutorOptions &exec,
                                         const SyntheticData &synthetic) {
  auto ds =
      openDatasetFor(forward, data, testSplit ? Split::Test : Split::Train, synthetic, exec.seed);
  if (!ds)
    return ds.takeError();
  auto eval = Evaluator::create(forward, batch, exec);
  if (!eval)
    return eval.takeError();
  auto loader =
      DataLoader::create(*ds, loaderOptionsFor(forward, **ds, batch, false, exec.seed, 2));
  if (!loader)
    return loader.takeError();
  return (*eval)->run(**loader);
}

llvm::Expected<TrainResult> runTraining(const TrainOptions &opts, llvm::raw_ostream &out,
                                        Workers &workers) {
  auto created = TrainingSession::create(opts, workers, out);
  if (!created)
    return created.takeError();
  TrainingSession &session = **created;
  // 1. Everything that can be wrong with the inputs, before any step.
  if (auto e = session.readModel())
    return e;
  if (session.isPsTask()) {
    if (auto e = session.servePsTask())
      return e;
    return TrainResult();
  }
  if (auto e = session.openData())
    return e;
  if (session.nothingToTrain())
    return session.reportNothingToTrain();
  // 2. Compile and bind; 3. the run plan; 4. train; 5. the summary.
  for (auto phase : {&TrainingSession::openMetrics, &TrainingSession::preparePlan,
                     &TrainingSession::createExecutor, &TrainingSession::restoreCheckpoint,
                     &TrainingSession::createEvaluator})
    if (auto e = (session.*phase)())
      return e;
  session.printRunPlan();
  for (auto phase :
       {&TrainingSession::trainSteps, &TrainingSession::finishRun, &TrainingSession::report})
    if (auto e = (session.*phase)())
      return e;
  return session.takeResult();
}

} // namespace graphc
