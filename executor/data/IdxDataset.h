//===- IdxDataset.h - MNIST-style IDX files (Fashion-MNIST) ------*- C++ -*-===//
//
// Reads the IDX format of MNIST and Fashion-MNIST: a big-endian header (two
// zero bytes, a type byte, the number of dimensions, then one 32-bit count per
// dimension) followed by the elements. Files may be gzip-compressed or plain
// (zlib reads both). Only unsigned bytes (type 0x08) are accepted, which is
// what these data sets use.
//
// Every check names the file: the magic number, the number of dimensions,
// the byte count against the header (truncated or trailing data), image and
// label counts against each other, and labels against the class count.
//
// The data set keeps the pixels as bytes and normalises on load with
// Fashion-MNIST's mean and std (0.2860, 0.3530), as torchvision users do.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/data/Dataset.h"

#include <vector>

namespace graphc {

/// One IDX array of unsigned bytes.
struct IdxArray {
  llvm::SmallVector<int64_t, 3> dims;
  std::vector<uint8_t> data;
};

/// Reads an IDX file of unsigned bytes with `rank` dimensions.
llvm::Expected<IdxArray> readIdxFile(llvm::StringRef path, unsigned rank);

/// Debian's dataset-fashion-mnist.
inline constexpr llvm::StringLiteral kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

class IdxDataset : public Dataset {
public:
  static constexpr float kMean = 0.2860f, kStd = 0.3530f;
  static constexpr int64_t kClasses = 10;

  /// Opens {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in `dir`.
  static llvm::Expected<std::unique_ptr<IdxDataset>> open(llvm::StringRef dir, Split split);

  std::string describe() const override;
  int64_t size() const override { return count_; }
  int64_t numClasses() const override { return kClasses; }
  SampleShape shape() const override { return {1, rows_, cols_}; }
  Normalization normalization() const override;
  llvm::Error load(int64_t index, float *pixels, int64_t &label) const override;

  /// The raw byte of pixel (y, x) of sample `index`, as stored in the file.
  uint8_t rawPixel(int64_t index, int64_t y, int64_t x) const {
    return images_[(index * rows_ + y) * cols_ + x];
  }

private:
  IdxDataset() = default;

  std::string dir_;
  Split split_ = Split::Train;
  int64_t count_ = 0, rows_ = 0, cols_ = 0;
  std::vector<uint8_t> images_, labels_;
};

} // namespace graphc
