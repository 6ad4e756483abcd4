#include "tools/driver/Evaluator.h"

#include "ir/Diagnostics.h"
#include "passes/AddLoss.h"
#include "passes/strategy/Compile.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/TrainingData.h"
#include "tools/driver/TrainOptions.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>

namespace graphc {

namespace {

/// The index of a row's largest value (the first of equals).
int64_t argmax(const float *row, int64_t n) {
  return std::max_element(row, row + n) - row;
}

} // namespace

std::string EvalResult::describe() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (!classifies)
    os << llvm::format("loss %.4f (mse, %lld samples)", loss, (long long)samples);
  else
    os << llvm::format("accuracy %.2f%% (%lld/%lld), loss %.4f", 100 * accuracy(),
                       (long long)correct, (long long)samples, loss);
  return s;
}

void scoreOutput(LossKind kind, const Tensor &output, const Tensor &labels, int64_t rows,
                 double &lossSum, int64_t &correct) {
  const int64_t width = output.shape()[0] ? output.numElements() / output.shape()[0] : 0;
  const float *z = output.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = z + r * width;
    if (kind == LossKind::Mse) {
      const float *target = labels.data<float>() + r * width;
      for (int64_t c = 0; c < width; ++c)
        lossSum += ((double)row[c] - target[c]) * ((double)row[c] - target[c]);
      continue;
    }
    const int64_t label = labels.data<int64_t>()[r], best = argmax(row, width);
    if (kind == LossKind::Nll) {
      lossSum -= row[label];
    } else {
      double sum = 0;
      for (int64_t c = 0; c < width; ++c)
        sum += std::exp((double)row[c] - row[best]);
      lossSum += std::log(sum) + row[best] - row[label];
    }
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
  e->loss_ = forward.plan().loss.value_or(LossKind::CrossEntropy);
  // A probability head is scored on its logits, as it trains (passes/AddLoss.h).
  Graph &g = e->module_->main();
  if (!g.outputs().empty() && e->loss_ == LossKind::CrossEntropy) {
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
  int64_t width = 0; // an mse row's elements
  for (;;) {
    auto batch = loader.next();
    if (!batch)
      return batch.takeError();
    if (!*batch)
      break;
    llvm::StringMap<Tensor> feeds;
    feeds[input_] = toModelInput((*batch)->inputs, inputType);
    auto out = executor_->run(feeds);
    if (!out)
      return out.takeError();
    const Tensor &output = (*out)[0];
    if (loss_ != LossKind::Mse && output.shape().size() != 2)
      return makeError("the model's first output is " + toString(output.type()) +
                       ", expected " + (loss_ == LossKind::Nll ? "log-probabilities" : "logits") +
                       " [batch, classes]");
    if (loss_ == LossKind::Mse && (*batch)->labels.type().shape != output.type().shape)
      return makeError("the data's targets are " + toString((*batch)->labels.type()) +
                       " but the model's first output is " + toString(output.type()));
    scoreOutput(loss_, output, (*batch)->labels, (*batch)->samples, lossSum, r.correct);
    r.samples += (*batch)->samples;
    width = output.shape()[0] ? output.numElements() / output.shape()[0] : 0;
  }
  r.classifies = loss_ != LossKind::Mse;
  const double terms = (double)r.samples * (r.classifies ? 1 : (double)width);
  r.loss = terms > 0 ? lossSum / terms : 0;
  return r;
}

} // namespace graphc
