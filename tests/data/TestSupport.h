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
#include "ir/Tensor.h"

#include <string>

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

} // namespace graphc::testing
