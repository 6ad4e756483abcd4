//===- Verifier.h - Structural and type checks of a module ------*- C++ -*-===//
//
// verify() checks what every pass may rely on: operands are defined earlier in
// the same graph (SSA, topological order), arities match the op table, every
// attribute is one its op takes and of the kind ir/OpAttrs.def gives (as are
// the module meta keys graphc reads), result types equal what the shape
// functions infer (which also check attribute values: positive strides, a
// group that divides the channels, ...), variables that nodes name exist and
// attached data has the variable's type, and graph outputs are defined.
// The first violation comes back as an error naming the node. A large graph
// has its types checked on the machine's threads; which violation comes back
// does not depend on them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace graphc {

llvm::Error verify(const Module &m);

} // namespace graphc
