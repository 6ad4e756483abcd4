//===- Archive.h - Module files and tensor archives on disk ------*- C++ -*-===//
//
// One binary container serves both placed module files (the module's text form
// plus the variables' data) and checkpoints (named tensors only):
//
//   "GRPHCAR1" | u64 text bytes | text | u64 count |
//   count x { u32 name bytes | name | u8 dtype | u8 rank | i64 dims[rank] |
//             u64 data bytes | data } | "GRPHCEND" | u64 FNV-1a of everything before
//
// Writing is crash-safe: a temporary file beside the target, fsync, rename,
// fsync of the directory; a reader never sees half a file, and the old file
// survives a failed write. Reading checks the end marker and the checksum, so
// a truncated or corrupted file is an error, not wrong numbers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace graphc {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct Archive {
  std::string text;
  std::vector<NamedTensor> tensors;
};

llvm::Error writeArchive(llvm::StringRef path, const Archive &a);
llvm::Expected<Archive> readArchive(llvm::StringRef path);
/// True if the file starts with the archive magic.
bool isArchiveFile(llvm::StringRef path);

/// Writes bytes to `path` crash-safely (temporary file, fsync, rename).
llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef bytes);

/// A module with its variables' data (the placed module file).
llvm::Error writeModuleFile(llvm::StringRef path, const Module &m);
llvm::Expected<std::unique_ptr<Module>> readModuleFile(llvm::StringRef path);

} // namespace graphc
