//===- Verifier.h - Structural and type checks of a module ------*- C++ -*-===//
//
// verify() checks what every pass may rely on: operands are defined earlier in
// the same graph (SSA, topological order), arities match the op table, result
// types equal what the shape functions infer, variables that nodes name exist
// and attached data has the variable's type, and graph outputs are defined.
// The first violation comes back as an error naming the node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace graphc {

llvm::Error verify(const Module &m);

} // namespace graphc
