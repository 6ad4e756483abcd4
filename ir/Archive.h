//===- Archive.h - Module files and tensor archives on disk ------*- C++ -*-===//
//
// One binary container serves both placed module files (the module's text form
// plus the variables' data) and checkpoints (the model's text and named
// tensors). Format version 2, little-endian:
//
//   "GRPHCAR2"                 magic; its last byte is the format version
//   u64 H                      header bytes
//   header (H bytes):          u64 text bytes | text | u64 count |
//                              count x { u32 name bytes | name | u8 dtype |
//                                        u8 rank | i64 dims[rank] |
//                                        u64 data bytes | u32 CRC-32 of the data }
//   u32 CRC-32 of everything before it (magic, H and the header)
//   data                       each tensor's bytes, in header order
//   "GRPHCEND"
//
// CRC-32 is the IEEE polynomial (zlib's crc32). The header's checksum is
// checked before anything in it is believed, so a declared size never
// allocates; every tensor's data is checked against its own checksum, so a
// flipped byte is refused naming the tensor, and a truncated file names the
// first tensor it cuts. Files of another format version are refused saying
// which version they are (version 1 had one checksum over the whole file).
//
// Writing is crash-safe (ir/OutputFile.h): a temporary file beside the
// target, fsync, rename, fsync of the directory; a reader never sees half a
// file, and the old file survives a failed write (a full disk, a size limit)
// or a kill. Reading goes through ir/InputFile.h: a device or FIFO is refused
// before a byte is read.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace graphc {

/// The format version this graphc writes and reads.
inline constexpr unsigned kArchiveVersion = 2;

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct Archive {
  std::string text;
  std::vector<NamedTensor> tensors;
};

llvm::Error writeArchive(llvm::StringRef path, const Archive &a);
/// Reads and checks the whole file (header and every tensor's checksum).
llvm::Expected<Archive> readArchive(llvm::StringRef path);
struct ArchiveHeader {
  std::string text;
  std::vector<std::pair<std::string, TensorType>> tensors;
};
/// Reads and checks the header only: the text and the tensors' names and
/// types.
llvm::Expected<ArchiveHeader> readArchiveHeader(llvm::StringRef path);
/// Tests and fuzzing: the bytes of an archive (well formed or not) with its
/// header's and tensors' checksums made to match, as far as its layout can be
/// read, so that a mutation reaches the checks after the checksums.
std::string withValidChecksums(llvm::StringRef bytes);
/// True if the file starts with the archive magic (of any format version).
bool isArchiveFile(llvm::StringRef path);

/// A module with its variables' data (the placed module file).
llvm::Error writeModuleFile(llvm::StringRef path, const Module &m);
llvm::Expected<std::unique_ptr<Module>> readModuleFile(llvm::StringRef path);

} // namespace graphc
