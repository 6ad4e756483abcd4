//===- Equivalence.h - Structural equality of modules ------------*- C++ -*-===//
//
// Two modules are equal when their names, meta, variables (with data), graphs,
// nodes (op, name, operand and result names, types, attributes, tower,
// devices, reason) and outputs agree, in order. On a difference, `why` says
// where the first one is; golden and round-trip tests print it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include <string>

namespace graphc {

bool structurallyEqual(const Module &a, const Module &b, std::string *why = nullptr);

} // namespace graphc
