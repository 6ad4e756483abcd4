//===- FuzzSupport.h - What the fuzz targets share ---------------*- C++ -*-===//
//
// Every fuzz target is one LLVMFuzzerTestOneInput over a reader of outside
// bytes. A reader may refuse its input (an llvm::Error, consumed here); it
// may not crash, hang, leak or allocate beyond its limits. Where a target can
// say more than "no crash" (a parsed module must print and parse back), it
// aborts on a broken promise, which libFuzzer reports like a crash.
//
// The same sources build twice: with libFuzzer (GRAPHC_FUZZ, clang) to search,
// and with ReplayMain.cpp in every build to rerun the seed corpus and the
// regression inputs as ctest tests (label fuzz).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace graphc::fuzz {

/// The input as a StringRef.
inline llvm::StringRef bytesOf(const uint8_t *data, size_t size) {
  return {reinterpret_cast<const char *>(data), size};
}

/// For readers that take a path: writes the input to this process's scratch
/// file with the given extension (replaced on every call; removed when the
/// process exits) and returns its path.
std::string scratchFile(llvm::StringRef bytes, llvm::StringRef extension);

/// For archive readers (module files, checkpoints): calls `read` with the path
/// of a scratch file holding the input as it is, then with its checksums
/// re-stamped (withValidChecksums), so that mutations also reach what the
/// checksums guard.
void readArchiveBothWays(llvm::StringRef raw, llvm::StringRef extension,
                         llvm::function_ref<void(const std::string &path)> read);

/// Consumes the result of a reader: a refusal is fine, a value is returned.
template <typename T> bool accepted(llvm::Expected<T> &result) {
  if (result)
    return true;
  llvm::consumeError(result.takeError());
  return false;
}
inline void refusedOrAccepted(llvm::Error e) { llvm::consumeError(std::move(e)); }

/// A whole archive target: `read(path)` (returning llvm::Expected) both ways.
template <typename ReadFn>
int archiveTarget(const uint8_t *data, size_t size, llvm::StringRef extension, ReadFn read) {
  readArchiveBothWays(bytesOf(data, size), extension, [&](const std::string &path) {
    auto result = read(path);
    accepted(result);
  });
  return 0;
}

/// Aborts with a message: a promise of the reader did not hold.
[[noreturn]] void broken(llvm::StringRef what, llvm::Error why = llvm::Error::success());

} // namespace graphc::fuzz
