//===- NpzDataset.cpp - Samples and labels from a NumPy .npz file ---------===//

#include "executor/data/NpzDataset.h"

#include "executor/data/Npz.h"
#include "ir/Diagnostics.h"

#include <cstring>

namespace graphc {
namespace {

const Tensor *find(const NpzArrays &arrays, llvm::StringRef name) {
  for (const auto &[key, t] : arrays)
    if (key == name)
      return &t;
  return nullptr;
}

/// The split's x and y, by the names in the header.
llvm::Expected<std::pair<const Tensor *, const Tensor *>>
splitArrays(const NpzArrays &arrays, Split split, const std::string &file, std::string &names) {
  const char *x = split == Split::Train ? "x_train" : "x_test";
  const char *y = split == Split::Train ? "y_train" : "y_test";
  if (split == Split::Train && !find(arrays, x) && find(arrays, "x")) {
    x = "x";
    y = "y";
  }
  const Tensor *xt = find(arrays, x), *yt = find(arrays, y);
  if (!xt || !yt) {
    std::string held;
    for (const auto &[key, t] : arrays)
      held += (held.empty() ? "" : ", ") + key;
    return makeError(
        file + " has no " + (split == Split::Train ? "x_train and y_train (or x and y)"
                                                   : "x_test and y_test") +
        " for the " + splitName(split) + " split (it holds " + held + ")" +
        (split == Split::Test ? "; evaluate on the training arrays with `graphrun eval "
                                "--train-split`, or train with --no-eval"
                              : ""));
  }
  names = std::string(x) + ", " + y;
  return std::make_pair(xt, yt);
}

/// `from` ([N, ...]) as [N, ...sample] of `want`'s element type.
llvm::Expected<Tensor> convert(const Tensor &from, const TensorType &sample, llvm::StringRef what,
                               llvm::StringRef file) {
  const int64_t n = from.shape().empty() ? 0 : from.shape()[0];
  const int64_t perSample = sample.numElements();
  auto mismatch = [&](const llvm::Twine &why) {
    return makeError(file + ": " + what + " is " + toString(from.type()) + ", " + why);
  };
  if (from.shape().empty() || (n > 0 && from.numElements() / n != perSample))
    return mismatch("but the model takes samples of " + shapeToString(sample.shape) + " (" +
                    llvm::Twine(perSample) + " values each)");
  const bool integerIn = from.dtype() == DType::I64 || from.dtype() == DType::I32 ||
                         from.dtype() == DType::Bool;
  if (!isFloat(sample.dtype) && !integerIn)
    return mismatch("but the model takes " + dtypeName(sample.dtype) +
                    ": token ids and class labels must be integers");
  if (sample.dtype != DType::F32 && sample.dtype != DType::I64 && sample.dtype != DType::I32)
    return mismatch("but the model takes " + dtypeName(sample.dtype) +
                    ", which npz data does not feed (f32, i64 and i32 only)");
  Dims dims{n};
  dims.append(sample.shape.begin(), sample.shape.end());
  Tensor out(TensorType(sample.dtype, dims));
  if (from.dtype() == sample.dtype) {
    std::memcpy(out.raw(), from.raw(), out.bytes());
    return out;
  }
  for (int64_t i = 0, e = out.numElements(); i < e; ++i)
    out.set(i, from.at(i));
  return out;
}

} // namespace

llvm::Expected<std::unique_ptr<NpzDataset>> NpzDataset::open(llvm::StringRef path, Split split,
                                                             const TensorLayout &want) {
  auto arrays = readNpz(path);
  if (!arrays)
    return arrays.takeError();
  std::unique_ptr<NpzDataset> ds(new NpzDataset());
  ds->path_ = path.str();
  ds->split_ = split;
  const std::string file = "npz:" + path.str();
  auto xy = splitArrays(*arrays, split, file, ds->names_);
  if (!xy)
    return xy.takeError();
  auto [x, y] = *xy;
  if (x->shape().empty() || y->shape().empty() || x->shape()[0] != y->shape()[0])
    return makeError(file + ": " + ds->names_ + " are " + toString(x->type()) + " and " +
                     toString(y->type()) + ": they must hold the same number of samples (axis 0)");
  auto inputs = convert(*x, want.input, "the samples array", file);
  if (!inputs)
    return inputs.takeError();
  const bool classes = want.label.rank() == 0;
  if (classes && isFloat(y->dtype()))
    return makeError(file + ": the labels array is " + toString(y->type()) +
                     ", but the loss takes class indices (integers); for float targets train "
                     "with --loss mse");
  auto labels = convert(*y, want.label, classes ? "the labels array" : "the targets array", file);
  if (!labels)
    return labels.takeError();
  ds->size_ = x->shape()[0];
  if (ds->size_ == 0)
    return makeError(file + ": the " + splitName(split) + " split holds no samples");
  if (classes) {
    const int64_t *l = labels->data<int64_t>();
    for (int64_t i = 0; i < ds->size_; ++i) {
      if (l[i] < 0)
        return makeError(file + ": label " + llvm::Twine(l[i]) + " of sample " + llvm::Twine(i) +
                         " is negative");
      ds->classes_ = std::max(ds->classes_, l[i] + 1);
    }
  }
  ds->layout_ = want;
  ds->inputs_ = std::move(*inputs);
  ds->labels_ = std::move(*labels);
  return ds;
}

std::string NpzDataset::describe() const {
  return "npz " + splitName(split_).str() + " (" + path_ + ": " + names_ + ")";
}

SampleShape NpzDataset::shape() const {
  return {1, 1, layout_.input.numElements()};
}

llvm::Error NpzDataset::load(int64_t, float *, int64_t &) const {
  return makeError(describe() + " holds tensors, not images");
}

llvm::Error NpzDataset::loadTensor(int64_t index, std::byte *input, std::byte *label) const {
  const size_t in = layout_.input.bytes(), lab = layout_.label.bytes();
  std::memcpy(input, static_cast<const std::byte *>(inputs_.raw()) + index * in, in);
  std::memcpy(label, static_cast<const std::byte *>(labels_.raw()) + index * lab, lab);
  return llvm::Error::success();
}

} // namespace graphc
