//===- ImageFolderDataset.h - A folder of class folders ----------*- C++ -*-===//
//
// images:DIR, laid out as torchvision's ImageFolder: every sub-folder of DIR
// is a class, numbered in the byte order of the folder names; its samples are
// the .jpg, .jpeg and .png files (any case) anywhere below it, in byte order
// of their relative paths. Other files, hidden entries and files directly in
// DIR are ignored. A class folder without images keeps its number, so
// numbering never depends on the content. DIR without any image is an error.
//
// load() reads and decodes the file (ImageDecode.h), resizes it to the
// configured height × width with the policy of Resize.h, and normalises with
// ImageNet's mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225). A file
// that cannot be read or decoded is an error naming the file, which the loader
// counts and skips.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/data/Dataset.h"

#include <vector>

namespace graphc {

class ImageFolderDataset : public Dataset {
public:
  static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
  static constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};

  /// Scans `dir`; samples come out as 3 × height × width.
  static llvm::Expected<std::unique_ptr<ImageFolderDataset>> open(llvm::StringRef dir,
                                                                  int64_t height, int64_t width);

  std::string describe() const override;
  int64_t size() const override { return (int64_t)files_.size(); }
  int64_t numClasses() const override { return (int64_t)classNames_.size(); }
  SampleShape shape() const override { return {3, height_, width_}; }
  Normalization normalization() const override;
  llvm::Error load(int64_t index, float *pixels, int64_t &label) const override;

  llvm::ArrayRef<std::string> classNames() const { return classNames_; }
  const std::string &path(int64_t index) const { return files_[index].path; }

private:
  struct File {
    std::string path;
    int64_t label;
  };
  ImageFolderDataset() = default;

  std::string dir_;
  int64_t height_ = 0, width_ = 0;
  std::vector<std::string> classNames_;
  std::vector<File> files_;
};

/// One image file as images:DIR loads it: decoded, resized to height ×
/// width, normalised with ImageNet's statistics, 3 × height × width floats
/// into `pixels` (`graphrun infer` reads its image inputs so).
llvm::Error loadImageFile(llvm::StringRef path, int64_t height, int64_t width, float *pixels);

} // namespace graphc
