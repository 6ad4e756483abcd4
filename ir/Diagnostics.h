//===- Diagnostics.h - Errors a user's input can cause -----------*- C++ -*-===//
//
// Errors in two tiers (STYLE.md): bugs assert; anything a user's input can
// cause is an llvm::Error carrying one clear message. These helpers give those
// messages one shape: errors about a node start with "node 'name' (Op): " (nodeError, in
// ir/Module.h beside Node).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <string>

namespace graphc {

/// A plain error with a message.
llvm::Error makeError(const llvm::Twine &msg);
/// Prefixes an error's message with `context: `.
llvm::Error withContext(llvm::Error e, const llvm::Twine &context);

/// Bytes from a file as a message may quote them: one line whatever they
/// hold (a newline, a quote or any byte outside printable ASCII becomes an
/// escape such as \n or \x1B) and at most `max` characters of it, cut
/// with "..." (a message promises one line, and a file may hold anything).
std::string printable(llvm::StringRef bytes, size_t max = 80);
/// The error with every control byte of its message escaped (\n, \x1B):
/// readers return through it, so no message they build from a file's bytes
/// spans lines.
llvm::Error oneLine(llvm::Error e);

/// A duration in seconds for a message, in three significant digits
/// ("0.25", "60", "1.2e+03"); the message says " s" after it.
std::string secondsText(std::chrono::milliseconds t);

} // namespace graphc
