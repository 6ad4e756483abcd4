//===- Evaluator.h - Accuracy and loss of a model on a data set --*- C++ -*-===//
//
// An inference module compiled from the forward model (BatchNorm uses running
// statistics, Dropout is the identity) and its own executor. It scores the
// loss the model trained with (PlanInfo::loss, --loss): the mean
// cross-entropy or NLL per sample with the accuracy, or the mean squared
// error per element. Variables come
// from the trained executor (copyFrom) or from the forward module's data.
// Every sample counts: a short last batch is padded with zeros and only its
// real rows are scored, which is exact because inference treats rows
// independently.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "executor/data/DataLoader.h"

#include <memory>

namespace graphc {

struct EvalResult;

class Evaluator {
public:
  static llvm::Expected<std::unique_ptr<Evaluator>> create(const Module &forward, int64_t batch,
                                                           const ExecutorOptions &exec);
  /// Copies every variable of the inference module from a trained executor.
  llvm::Error copyFrom(const Executor &trained);
  /// Scores one epoch of `loader` (created with dropLast = false).
  llvm::Expected<EvalResult> run(DataLoader &loader);
  int64_t batch() const { return batch_; }

private:
  Evaluator() = default;
  std::unique_ptr<Module> module_;
  std::unique_ptr<Executor> executor_;
  std::string input_;
  int64_t batch_ = 0;
  LossKind loss_ = LossKind::CrossEntropy;
};

/// The loss `kind` summed over the first `rows` rows of `output` against
/// `labels` (per row: softmax cross-entropy of logits, -log-probability of
/// the label, or the squared errors against the targets), and the rows whose
/// argmax is their label (not for mse).
void scoreOutput(LossKind kind, const Tensor &output, const Tensor &labels, int64_t rows,
                 double &lossSum, int64_t &correct);

/// The images tensor in the model input's shape: a rank-2 input takes the
/// flattened sample (the loader gives a channels-last input its layout, and
/// a tensor data set's batch is already the input's).
Tensor toModelInput(const Tensor &images, const TensorType &input);

} // namespace graphc
