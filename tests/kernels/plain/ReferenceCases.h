//===- ReferenceCases.h - Kernel cases written by reference.py ---*- C++ -*-===//
//
// reference.py (a ctest fixture) writes cases.json and .npy files into the
// build directory: one node per case, with PyTorch's inputs and expected
// results over one or more steps. runReferenceCases builds each case's node
// with the Builder, runs it with runNode and compares every result and every
// updated variable; each mismatch is a gtest failure naming the case.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace graphc {

/// Runs every case whose name starts with `prefix`; returns how many ran.
int runReferenceCases(llvm::StringRef prefix);

/// Whether got matches want element by element: |got - want| <= atol +
/// rtol * |want| (NaN matches NaN); shapes must agree, dtypes may differ
/// (bf16 results are compared with f32 files). On a mismatch, `why` says
/// where.
bool closeTo(const Tensor &got, const Tensor &want, double rtol, double atol, std::string &why);

} // namespace graphc
