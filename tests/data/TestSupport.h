//===- TestSupport.h - Shared helpers of the input pipeline tests -*- C++ -*-===//
//
// Reference files come from tests/data/make_reference.py (PIL, numpy, torch
// under /usr/bin/python3), run at most once per version of the script: its
// output lands in the build directory under a name holding the script's hash,
// written to a temporary folder and renamed into place, so tests running in
// parallel never see half a reference.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/data/Dataset.h"
#include "ir/Diagnostics.h"
#include "ir/Tensor.h"

#include <chrono>
#include <set>
#include <string>
#include <thread>

namespace graphc::testing {

/// The folder make_reference.py wrote (runs it when needed; fails the test
/// through an empty string and a GTest failure if it cannot).
std::string referenceDir();

/// A fresh, empty folder for one test, under the build directory.
std::string freshDir(llvm::StringRef name);

/// Writes `bytes` to `path`.
void writeFile(llvm::StringRef path, llvm::StringRef bytes);

/// The Tensor in a .npy file; fails the test if it cannot be read.
Tensor loadNpy(llvm::StringRef path);

/// Sample i is a 1×2×2 image filled with i, label i mod 3; the indices in
/// `broken` fail to load. An optional delay per sample makes loading slow.
class CountingDataset : public Dataset {
public:
  CountingDataset(int64_t n, std::set<int64_t> broken = {},
                  std::chrono::microseconds delay = std::chrono::microseconds(0))
      : n_(n), broken_(std::move(broken)), delay_(delay) {}
  std::string describe() const override { return "counting"; }
  int64_t size() const override { return n_; }
  int64_t numClasses() const override { return 3; }
  SampleShape shape() const override { return {1, 2, 2}; }
  Normalization normalization() const override { return {{0}, {1}}; }
  llvm::Error load(int64_t index, float *pixels, int64_t &label) const override {
    if (delay_.count())
      std::this_thread::sleep_for(delay_);
    if (broken_.count(index))
      return makeError("sample " + llvm::Twine(index) + " is broken");
    std::fill(pixels, pixels + 4, (float)index);
    label = index % 3;
    return llvm::Error::success();
  }

private:
  int64_t n_;
  std::set<int64_t> broken_;
  std::chrono::microseconds delay_;
};

} // namespace graphc::testing
