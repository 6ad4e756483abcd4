//===- Npy.h - NumPy .npy files ----------------------------------*- C++ -*-===//
//
// Reads and writes NumPy's .npy format (version 1.0 to 3.0, little-endian,
// C order) for f32, f16, i64, i32, bool; bf16 has no NumPy dtype. Reading
// also takes the dtypes data sets come in, as the nearest of ours: float64
// rounds to f32, (u)int8 and (u)int16 widen to i32, uint32 to i64. Used by
// `graphrun infer` for inputs and outputs and by reference tests that compare
// with PyTorch. Errors name the file and what is wrong with it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h"

#include "llvm/Support/Error.h"

namespace graphc {

llvm::Expected<Tensor> readNpy(llvm::StringRef path);
/// Crash-safe (temporary file and rename).
llvm::Error writeNpy(llvm::StringRef path, const Tensor &t);

/// The same, to and from memory.
llvm::Expected<Tensor> parseNpy(llvm::StringRef bytes, llvm::StringRef name = "<npy>");
llvm::Expected<std::string> encodeNpy(const Tensor &t);

} // namespace graphc
