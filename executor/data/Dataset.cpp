//===- Dataset.cpp - Data set specs and shared helpers --------------------===//

#include "executor/data/Dataset.h"

#include "ir/Diagnostics.h"

namespace graphc {

Dataset::~Dataset() = default;

llvm::Error Dataset::loadTensor(int64_t, std::byte *, std::byte *) const {
  return makeError(describe() + " is an image data set, not a tensor data set");
}

std::string toString(const SampleShape &s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

llvm::Expected<Split> parseSplit(llvm::StringRef s) {
  if (s == "train")
    return Split::Train;
  if (s == "test" || s == "eval" || s == "val" || s == "t10k")
    return Split::Test;
  return makeError("unknown split '" + s + "' (expected train or test)");
}

llvm::StringRef splitName(Split s) {
  return s == Split::Train ? "train" : "test";
}

} // namespace graphc
