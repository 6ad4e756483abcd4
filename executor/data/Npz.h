//===- Npz.h - NumPy .npz archives -------------------------------*- C++ -*-===//
//
// readNpz() reads the arrays of an .npz file (a zip archive of .npy files, as
// numpy.savez and numpy.savez_compressed write it): entries stored or
// deflated, ZIP64 sizes and offsets, each entry's CRC-32 checked. An entry
// `x.npy` is the array `x`, parsed by ir/Npy.h (so float64 comes back f32 and
// small integers as i32). Errors name the file and what is wrong: not a zip
// archive, a truncated or corrupt entry, an entry that is not .npy, an
// encrypted or otherwise compressed entry.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h"

#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace graphc {

/// The arrays in the archive's order, by name (without ".npy").
using NpzArrays = std::vector<std::pair<std::string, Tensor>>;

llvm::Expected<NpzArrays> readNpz(llvm::StringRef path);
/// The names of the arrays, from the archive's directory alone.
llvm::Expected<std::vector<std::string>> npzArrayNames(llvm::StringRef path);
/// The same from memory; `name` is for messages.
llvm::Expected<NpzArrays> parseNpz(llvm::StringRef bytes, llvm::StringRef name);

} // namespace graphc
