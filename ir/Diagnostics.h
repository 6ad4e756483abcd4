//===- Diagnostics.h - Errors a user's input can cause -----------*- C++ -*-===//
//
// Errors in two tiers (STYLE.md): bugs assert; anything a user's input can
// cause is an llvm::Error carrying one clear message. These helpers give those
// messages one shape: errors about a node start with "node 'name' (Op): ".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace graphc {

class Node;

/// A plain error with a message.
llvm::Error makeError(const llvm::Twine &msg);
/// "node 'Mixed_5b/branch1x1/conv' (Conv): <msg>".
llvm::Error nodeError(const Node &n, const llvm::Twine &msg);
/// Prefixes an error's message with `context: `.
llvm::Error withContext(llvm::Error e, const llvm::Twine &context);

} // namespace graphc
