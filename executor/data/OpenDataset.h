//===- OpenDataset.h - A data set by its spec ---------------------*- C++ -*-===//
//
// The one place that knows every kind of data set (the data sets include
// Dataset.h, and this includes them).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/data/Dataset.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>

namespace graphc {

/// Opens a data set by spec: "synthetic" | "fashion-mnist" | "fashion-mnist:DIR"
/// | "images:DIR" | "npz:FILE".
llvm::Expected<std::unique_ptr<Dataset>> openDataset(llvm::StringRef spec,
                                                     const DatasetOptions &options);

/// Whether the data set has a test split to evaluate on: Fashion-MNIST's
/// t10k files, an npz file's x_test and y_test (only its directory is read).
/// Synthetic data and image folders have none.
llvm::Expected<bool> hasTestSplit(llvm::StringRef spec);

} // namespace graphc
