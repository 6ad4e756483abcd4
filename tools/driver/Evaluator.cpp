#include "tools/driver/Evaluator.h"

#include "ir/Diagnostics.h"
#include "passes/AddLoss.h"
#include "passes/strategy/Compile.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/TrainOptions.h"

#include <cmath>

namespace graphc {

void scoreLogits(const Tensor &logits, const Tensor &labels, int64_t rows, double &lossSum,
                 int64_t &correct) {
  int64_t classes = logits.shape()[1];
  const float *z = logits.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = z + r * classes;
    int64_t best = 0;
    float maxv = row[0];
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > maxv) {
        maxv = row[c];
        best = c;
      }
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp((double)row[c] - maxv);
    int64_t label = labels.data<int64_t>()[r];
    lossSum += std::log(sum) + maxv - row[label];
    correct += best == label;
  }
}

Tensor toModelInput(const Tensor &images, const TensorType &input) {
  if (input.rank() == 2 && images.shape().size() == 4)
    return images.reshaped({images.shape()[0], images.numElements() / images.shape()[0]});
  return images;
}

llvm::Expected<std::unique_ptr<Evaluator>> Evaluator::create(const Module &forward, int64_t batch,
                                                             const ExecutorOptions &exec) {
  std::unique_ptr<Evaluator> e(new Evaluator());
  auto m = compileInference(forward, batch);
  if (!m)
    return m.takeError();
  e->module_ = std::move(*m);
  // A probability head is scored on its logits, as it trains (passes/AddLoss.h).
  Graph &g = e->module_->main();
  if (!g.outputs().empty()) {
    llvm::SmallVector<Value *, 2> outputs(g.outputs().begin(), g.outputs().end());
    outputs[0] = logitsOf(outputs[0]);
    g.setOutputs(outputs);
  }
  auto in = dataInput(*e->module_);
  if (!in)
    return in.takeError();
  e->input_ = (*in)->name();
  e->batch_ = batch;
  auto ex = Executor::create(*e->module_, exec);
  if (!ex)
    return ex.takeError();
  e->executor_ = std::move(*ex);
  return e;
}

llvm::Error Evaluator::copyFrom(const Executor &trained) {
  for (const std::string &name : executor_->variableNames()) {
    auto t = trained.readVariable(name);
    if (!t)
      return t.takeError();
    if (auto e = executor_->writeVariable(name, *t))
      return e;
  }
  return llvm::Error::success();
}

llvm::Expected<EvalResult> Evaluator::run(DataLoader &loader) {
  EvalResult r;
  const TensorType &inputType = module_->main().findInput(input_)->result()->type();
  loader.startEpoch(0);
  double lossSum = 0;
  for (;;) {
    auto batch = loader.next();
    if (!batch)
      return batch.takeError();
    if (!*batch)
      break;
    llvm::StringMap<Tensor> feeds;
    feeds[input_] = toModelInput((*batch)->images, inputType);
    auto out = executor_->run(feeds);
    if (!out)
      return out.takeError();
    const Tensor &logits = (*out)[0];
    if (logits.shape().size() != 2)
      return makeError("the model's first output is " + toString(logits.type()) +
                       ", expected logits [batch, classes]");
    scoreLogits(logits, (*batch)->labels, (*batch)->samples, lossSum, r.correct);
    r.samples += (*batch)->samples;
  }
  r.loss = r.samples ? lossSum / r.samples : 0;
  return r;
}

} // namespace graphc
