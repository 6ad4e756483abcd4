//===- Dataset.h - Random access to labelled samples -------------*- C++ -*-===//
//
// A Dataset hands out sample `index` in its native form: C×H×W floats,
// already normalised, and an integer label in [0, numClasses()). Every data
// set is deterministic: the same index gives the same pixels and label on
// every call, on any thread, in any order. load() is const and thread-safe,
// so the loader's worker threads share one Dataset.
//
// load() fails only for a sample that cannot be read (an unreadable or corrupt
// image file); the loader skips such a sample and reports it. Problems with
// the data set as a whole (missing files, bad headers, an empty folder) are
// errors of openDataset() (executor/data/OpenDataset.h).
//
// Specs: "synthetic", "fashion-mnist" (Debian's dataset-fashion-mnist),
// "fashion-mnist:DIR", "images:DIR" (a folder of class folders),
// "npz:FILE" (NumPy arrays: tokens, tables, targets). See
// docs/input-pipeline.md.
//
// An image data set hands out C×H×W floats and a class label (load()). A
// tensor data set (tensorLayout() set; npz) hands out its samples as the
// model takes them, of any element type, and labels that are class indices
// or targets of any shape (loadTensor()); the loader feeds them unconverted.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Type.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace graphc {

/// The shape of one sample, without the batch: channels × height × width.
struct SampleShape {
  int64_t channels = 0, height = 0, width = 0;

  int64_t numElements() const { return channels * height * width; }
  bool operator==(const SampleShape &o) const = default;
};

/// "3x299x299".
std::string toString(const SampleShape &s);

/// How a data set normalised its samples: x = (v - mean[c]) / std[c] where v is
/// the raw intensity in [0, 1]. The loader needs it to mix channels (3 → 1).
struct Normalization {
  llvm::SmallVector<float, 3> mean, std;
};

enum class Split { Train, Test };

/// "train" or "test" (also "eval", "val" and "t10k" for test).
llvm::Expected<Split> parseSplit(llvm::StringRef s);
llvm::StringRef splitName(Split s);

/// One sample of a tensor data set, without the batch axis: the model
/// input's type, and the label's (i64 [] for a class index).
struct TensorLayout {
  TensorType input, label;
};

class Dataset {
public:
  virtual ~Dataset();

  /// Names the data set in messages and logs: "fashion-mnist train (DIR)".
  virtual std::string describe() const = 0;
  virtual int64_t size() const = 0;
  virtual int64_t numClasses() const = 0;
  virtual SampleShape shape() const = 0;
  virtual Normalization normalization() const = 0;
  /// Writes sample `index` (0 <= index < size()) into `pixels`
  /// (shape().numElements() floats, C×H×W) and its label. Thread-safe.
  virtual llvm::Error load(int64_t index, float *pixels, int64_t &label) const = 0;

  /// A tensor data set's sample types; nullopt for image data sets.
  virtual std::optional<TensorLayout> tensorLayout() const { return std::nullopt; }
  /// Writes sample `index` of a tensor data set: tensorLayout()'s input and
  /// label bytes. Thread-safe.
  virtual llvm::Error loadTensor(int64_t index, std::byte *input, std::byte *label) const;
};

struct DatasetOptions {
  Split split = Split::Train;
  /// synthetic: the sample shape (give the model's input). images:DIR: the
  /// height and width every image is resized to (channels are always 3).
  SampleShape shape{3, 224, 224};
  /// synthetic only: number of samples, classes, and the seed of the class
  /// patterns and the noise.
  int64_t samples = 4096;
  int64_t classes = 1000;
  uint64_t seed = 0;
  /// npz:FILE: the sample the model takes (its input's type without the
  /// batch) and the labels its loss takes (i64 [] class indices, or f32
  /// targets of the output's shape); the file's arrays are converted to them.
  std::optional<TensorLayout> tensor;
};

} // namespace graphc
