//===- Parser.h - Reading the text form back --------------------*- C++ -*-===//
//
// Parses what Printer.h writes. Every error, syntactic or semantic (an unknown
// op, a type that does not match what the operands give, an undefined value),
// reports `file:line:col: message`. Types of parsed nodes are checked against
// the shape functions as they are read.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace graphc {

llvm::Expected<std::unique_ptr<Module>> parseModule(llvm::StringRef text,
                                                    llvm::StringRef filename = "<input>");
/// Reads a file and parses it.
llvm::Expected<std::unique_ptr<Module>> parseModuleFile(llvm::StringRef path);

} // namespace graphc
