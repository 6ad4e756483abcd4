//===- NpzDataset.h - Samples and labels from a NumPy .npz file --*- C++ -*-===//
//
// `--data npz:FILE`: a tensor data set (Dataset.h) for models that do not
// take images: token ids for a text model, rows of a table, any input with
// class labels or regression targets. The arrays, by the names Keras's own
// .npz files use:
//
//   train split  x_train, y_train   (or x, y)
//   test split   x_test,  y_test
//
// x is [N, ...] and y [N] or [N, 1] (class indices, for cross-entropy and
// NLL) or [N, ...] (targets, for MSE), with the same N. Every array is read
// and converted once, at open, to what the model takes (DatasetOptions::
// tensor): x to the model input's element type (integers to f32 for a float
// input; a float x for an integer input is refused, token ids must be
// integers), its samples reshaped to the input's shape where the element
// counts agree; class labels to i64, checked non-negative (the class count is
// the largest label + 1, checked against the logits by the caller); targets
// to f32, their count per sample the output's. Errors name the file, the
// array and what the model wanted.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/data/Dataset.h"
#include "ir/Tensor.h"

namespace graphc {

class NpzDataset : public Dataset {
public:
  static llvm::Expected<std::unique_ptr<NpzDataset>> open(llvm::StringRef path, Split split,
                                                          const TensorLayout &want);

  std::string describe() const override;
  int64_t size() const override { return size_; }
  int64_t numClasses() const override { return classes_; }
  /// A flat sample: 1 × 1 × the input's elements.
  SampleShape shape() const override;
  Normalization normalization() const override { return {}; }
  llvm::Error load(int64_t index, float *pixels, int64_t &label) const override;
  std::optional<TensorLayout> tensorLayout() const override { return layout_; }
  llvm::Error loadTensor(int64_t index, std::byte *input, std::byte *label) const override;

private:
  NpzDataset() = default;

  std::string path_, names_;
  Split split_ = Split::Train;
  TensorLayout layout_;
  int64_t size_ = 0, classes_ = 0;
  Tensor inputs_, labels_; ///< [N, ...] in the layout's types
};

} // namespace graphc
