//===- ModelOptions.h - What a built-in model is built with ------*- C++ -*-===//
//
// The options every built-in model takes (frontend/models/Models.h builds a
// model by name; ModelBuilders.h holds one builder per family).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

namespace graphc::models {

struct ModelOptions {
  int64_t numClasses = 0; ///< 0: the model's default (1000 ImageNet, 10 for the small ones)
  bool auxLogits = false; ///< inception_v3's auxiliary head
  int64_t imageSize = 0;  ///< square input side; 0: the model's default (299, 224, 28)
  int64_t batch = 0;      ///< 0 keeps the batch symbolic
  double dropout = -1;    ///< < 0: the model's default ratio
  std::vector<int64_t> hiddenSizes; ///< mlp; empty: {256, 256}
};

} // namespace graphc::models
