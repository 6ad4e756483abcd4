//===- AttributeText.h - Attribute values as the text form writes them -*- C++ -*-===//
//
// The text form's spelling of attribute values, strings and floats
// (ir/Printer.h prints whole modules with it; messages quote values with it).
// Only Attribute, not Node or Module: attribute checks (ir/OpAttrs.h) and the
// plan's metadata can name a value without reaching the module printer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Attribute.h"

#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <string>

namespace graphc {

/// The attribute value as the text form writes it.
void printAttribute(const Attribute &a, llvm::raw_ostream &os);
/// A float that parses back to the same double.
std::string formatDouble(double d);
/// `s` quoted, with '"', '\\', newlines and bytes outside printable ASCII escaped.
void printString(llvm::StringRef s, llvm::raw_ostream &os);
/// `bytes` bytes at `data` as a quoted string of hex digits (lossless).
void printHex(const void *data, size_t bytes, llvm::raw_ostream &os);

} // namespace graphc
