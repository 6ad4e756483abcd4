//===- InferInputs.cpp - What `graphrun infer --input` reads --------------===//

#include "tools/driver/InferInputs.h"

#include "executor/data/ImageFolderDataset.h"
#include "executor/data/Npz.h"
#include "executor/data/ShapeConversion.h"
#include "ir/Diagnostics.h"
#include "ir/Npy.h"
#include "tools/driver/TrainingData.h"

#include "llvm/Support/Path.h"

#include <cstring>

namespace graphc {
namespace {

bool hasExtension(llvm::StringRef path, std::initializer_list<llvm::StringRef> exts) {
  llvm::StringRef ext = llvm::sys::path::extension(path);
  return llvm::any_of(exts, [&](llvm::StringRef e) { return ext.equals_insensitive(e); });
}

bool isImage(llvm::StringRef path) {
  return hasExtension(path, {".jpg", ".jpeg", ".png"});
}

/// `t` in the element type of `want`, its batch kept; an error names `from`.
llvm::Expected<Tensor> asInput(Tensor t, const Node &input, llvm::StringRef from) {
  const TensorType &want = input.result()->type();
  auto mismatch = [&]() {
    return makeError("input '" + input.name() + "' expects " + toString(want) + ", " + from +
                     " holds " + toString(t.type()));
  };
  if (t.shape().size() != want.rank() || t.shape().empty())
    return mismatch();
  for (size_t i = 1; i < want.rank(); ++i)
    if (t.shape()[i] != want.shape[i])
      return mismatch();
  if (t.dtype() == want.dtype)
    return t;
  const bool integer = t.dtype() == DType::I64 || t.dtype() == DType::I32;
  if (!integer && !isFloat(t.dtype()))
    return mismatch();
  if (!isFloat(want.dtype) && !integer)
    return makeError("input '" + input.name() + "' expects " + toString(want) + ", " + from +
                     " holds " + toString(t.type()) + ": token ids must be integers");
  Tensor out(TensorType(want.dtype, Dims(t.shape().begin(), t.shape().end())));
  for (int64_t i = 0, n = out.numElements(); i < n; ++i)
    out.set(i, t.at(i));
  return out;
}

/// Images `paths` as one batch for `input`.
llvm::Expected<Tensor> readImages(llvm::ArrayRef<std::string> paths, const Node &input) {
  const TensorType &t = input.result()->type();
  std::optional<SampleShape> shape = t.rank() == 4 ? imageShapeOf(t) : std::nullopt;
  if (!shape || (shape->channels != 3 && shape->channels != 1) || !isFloat(t.dtype))
    return makeError("input '" + input.name() + "' is " + toString(t) + ", not an image input ([N, "
                     "C, H, W] or [N, H, W, C] of 1 or 3 channels); '" + paths[0] +
                     "' is an image");
  const int64_t n = (int64_t)paths.size(), h = shape->height, w = shape->width;
  const SampleShape rgb{3, h, w};
  Normalization norm;
  norm.mean.assign(std::begin(ImageFolderDataset::kMean), std::end(ImageFolderDataset::kMean));
  norm.std.assign(std::begin(ImageFolderDataset::kStd), std::end(ImageFolderDataset::kStd));
  auto mix = ShapeConversion::create(rgb, norm, *shape);
  if (!mix)
    return mix.takeError();
  const bool last = isChannelsLast(t);
  Tensor batch(TensorType(DType::F32, last ? Dims{n, h, w, shape->channels}
                                           : Dims{n, shape->channels, h, w}));
  std::vector<float> pixels(rgb.numElements()), converted(shape->numElements()), plane, scratch;
  for (int64_t i = 0; i < n; ++i) {
    if (auto e = loadImageFile(paths[i], h, w, pixels.data()))
      return e;
    float *row = batch.data<float>() + i * shape->numElements();
    mix->convert(pixels.data(), last ? converted.data() : row, plane, scratch);
    if (last)
      toChannelsLast(converted.data(), row, *shape);
  }
  return batch;
}

/// The array of `arrays` (from `path`) that feeds `input`.
llvm::Expected<Tensor> pickArray(const NpzArrays &arrays, const Node &input, bool only,
                                 llvm::StringRef path) {
  llvm::SmallVector<llvm::StringRef, 4> names{input.name()};
  if (only)
    names.append({"x", "x_test"});
  for (llvm::StringRef name : names)
    for (const auto &[key, t] : arrays)
      if (key == name)
        return asInput(t, input, ("'" + path + "' array '" + key + "'").str());
  if (only && arrays.size() == 1)
    return asInput(arrays[0].second, input, ("'" + path + "' array '" + arrays[0].first + "'").str());
  std::string held;
  for (const auto &[key, t] : arrays)
    held += (held.empty() ? "" : ", ") + key;
  return makeError("'" + path + "' has no array for input '" + input.name() + "' (name it '" +
                   input.name() + "'" + (only ? ", or 'x'" : "") + "); it holds " + held);
}

} // namespace

bool allNpy(llvm::ArrayRef<std::string> paths) {
  return llvm::all_of(paths, [](const std::string &p) { return hasExtension(p, {".npy"}); });
}

llvm::Expected<std::vector<Tensor>> readInferInputs(llvm::ArrayRef<std::string> paths,
                                                    llvm::ArrayRef<Node *> inputs) {
  std::vector<Tensor> out;
  auto next = [&](const llvm::Twine &what) -> llvm::Expected<const Node *> {
    if (out.size() == inputs.size())
      return makeError("the model has " + llvm::Twine(inputs.size()) + " inputs; " + what +
                       " would feed one more");
    return inputs[out.size()];
  };
  for (size_t i = 0; i < paths.size();) {
    const std::string &path = paths[i];
    if (isImage(path)) {
      size_t end = i;
      while (end < paths.size() && isImage(paths[end]))
        ++end;
      auto input = next("'" + llvm::Twine(path) + "'");
      if (!input)
        return input.takeError();
      auto t = readImages(paths.slice(i, end - i), **input);
      if (!t)
        return t.takeError();
      out.push_back(std::move(*t));
      i = end;
      continue;
    }
    if (hasExtension(path, {".npz"})) {
      auto arrays = readNpz(path);
      if (!arrays)
        return arrays.takeError();
      const bool only = inputs.size() == 1;
      for (size_t k = out.size(); k < inputs.size(); ++k) {
        auto t = pickArray(*arrays, *inputs[k], only, path);
        if (!t)
          return t.takeError();
        out.push_back(std::move(*t));
      }
      ++i;
      continue;
    }
    auto input = next("'" + llvm::Twine(path) + "'");
    if (!input)
      return input.takeError();
    auto t = readNpy(path);
    if (!t)
      return t.takeError();
    auto fed = asInput(std::move(*t), **input, ("'" + llvm::Twine(path) + "'").str());
    if (!fed)
      return fed.takeError();
    out.push_back(std::move(*fed));
    ++i;
  }
  if (out.size() != inputs.size())
    return makeError("the model has " + llvm::Twine(inputs.size()) + " inputs; --input gave " +
                     llvm::Twine(out.size()));
  for (size_t k = 1; k < out.size(); ++k)
    if (out[k].shape()[0] != out[0].shape()[0])
      return makeError("the inputs' batches differ: '" + inputs[0]->name() + "' has " +
                       llvm::Twine(out[0].shape()[0]) + " rows, '" + inputs[k]->name() + "' " +
                       llvm::Twine(out[k].shape()[0]));
  return out;
}

} // namespace graphc
