//===- MemoryLimit.h - The process's memory limit (--memory-limit) -*- C++ -*-===//
//
// graphc and graphrun take `--memory-limit SIZE` (e.g. 512M, 8G, 1.5GiB). With
// it, two bounds hold before anything is allocated:
//
//  - one tensor may take at most the limit (otherwise kMaxTensorBytes, 1 TiB):
//    every shape a file declares is held to it by checkTensorSize, so a model,
//    module, checkpoint or .npy file asking for more is refused with one line;
//  - the host memory that CPU devices allocate (arenas, scratch, variables,
//    constants) stays within it: the allocation that would pass it is refused,
//    naming the device and what it was for, before it is made.
//
// Readers whose sizes are not tensor shapes (IDX files, images) hold their
// declared sizes to it as well. Without the flag the limit is 0 (none).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace graphc {

/// The most bytes one tensor may take: 2^40 (1 TiB), far beyond any weight,
/// activation or input we run, and low enough that no element count or byte
/// size below it overflows. Shapes a file declares are held to it before
/// anything is allocated (a corrupt dimension must not become a wrapped
/// count or a terabyte allocation).
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;

/// Sets the process's limit in bytes (0: none).
void setMemoryLimit(int64_t bytes);
/// The limit in bytes; 0 when none was set.
int64_t memoryLimit();

/// The most bytes one tensor may take: the memory limit, or kMaxTensorBytes
/// when there is none or it is higher.
int64_t tensorByteLimit();
/// The bound tensorByteLimit() stands for, for messages: "the 1 TiB a tensor
/// may take" or "the --memory-limit of 512.00 MiB".
std::string tensorLimitText();

/// An error when `bytes` (declared by a file for `what`) exceed the memory
/// limit; success when there is no limit.
llvm::Error checkDeclaredBytes(int64_t bytes, const llvm::Twine &what);

/// The host bytes counted by reserveHostBytes() and not yet released.
int64_t reservedHostBytes();

/// Counts `bytes` of host memory about to be allocated for `what`; refused
/// (nothing counted) when the process would pass its memory limit.
llvm::Error reserveHostBytes(int64_t bytes, const llvm::Twine &what);
/// Gives back what reserveHostBytes counted.
void releaseHostBytes(int64_t bytes);

/// Parses a size as `--memory-limit` takes it: a positive number with an
/// optional binary unit K, M, G or T (also KB/KiB, ...; 1K = 1024).
llvm::Expected<int64_t> parseByteSize(llvm::StringRef text, llvm::StringRef flag);

/// `--memory-limit TEXT` as given on a command line: parsed and set.
llvm::Error applyMemoryLimitFlag(llvm::StringRef text);

/// "512.00 MiB": binary prefixes, two decimals ("100 B" below 1 KiB).
std::string bytesText(int64_t bytes);

} // namespace graphc
