//===- AttributeText.cpp --------------------------------------------------===//

#include "ir/AttributeText.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace graphc {

static bool needsEscape(unsigned char c) {
  return c == '"' || c == '\\' || c < 0x20 || c >= 0x7f;
}

void printString(llvm::StringRef s, llvm::raw_ostream &os) {
  os << '"';
  if (llvm::none_of(s, needsEscape)) { // names and devices: one write
    os << s << '"';
    return;
  }
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      os << '\\' << c;
    else if (c == '\n')
      os << "\\n";
    else if (c < 0x20 || c >= 0x7f)
      os << "\\x" << llvm::hexdigit(c >> 4, true) << llvm::hexdigit(c & 15, true);
    else
      os << c;
  }
  os << '"';
}

std::string formatDouble(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d > 0 ? "inf" : "-inf";
  // The form is %.<p>g with the smallest precision p that reads back exactly.
  // No precision below the length of the shortest exact digits (to_chars)
  // can, so the search starts there; that one nearly always does.
  char buf[32];
  char *end = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific).ptr;
  int prec = (int)std::count_if(buf, std::find(buf, end, 'e'), llvm::isDigit);
  for (;; ++prec) {
    // to_chars with a precision prints as printf's %.<prec>g does.
    end = std::to_chars(buf, buf + sizeof(buf) - 1, d, std::chars_format::general, prec).ptr;
    double back = 0;
    std::from_chars(buf, end, back);
    if (back == d || prec >= 17)
      break;
  }
  *end = 0;
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  return s;
}

void printHex(const void *data, size_t bytes, llvm::raw_ostream &os) {
  os << '"' << llvm::toHex(llvm::StringRef(static_cast<const char *>(data), bytes), true) << '"';
}

/// Tensors of up to this many elements print as a value list; larger as hex.
static constexpr int64_t kInlineTensorElements = 64;

void printAttribute(const Attribute &a, llvm::raw_ostream &os) {
  std::visit(
      [&](const auto &v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          os << v;
        } else if constexpr (std::is_same_v<T, double>) {
          os << formatDouble(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          printString(v, os);
        } else if constexpr (std::is_same_v<T, DType>) {
          os << dtypeName(v);
        } else if constexpr (std::is_same_v<T, Ints>) {
          os << '[';
          llvm::interleave(v, os, ", ");
          os << ']';
        } else if constexpr (std::is_same_v<T, Floats>) {
          os << '[';
          llvm::interleave(
              v, os, [&](double d) { os << formatDouble(d); }, ", ");
          os << ']';
        } else if constexpr (std::is_same_v<T, Strings>) {
          os << '[';
          llvm::interleave(
              v, os, [&](const std::string &s) { printString(s, os); }, ", ");
          os << ']';
        } else {
          static_assert(std::is_same_v<T, Tensor>);
          os << "tensor<" << toString(v.type()) << "> ";
          if (v.numElements() > kInlineTensorElements) {
            printHex(v.raw(), v.bytes(), os);
            return;
          }
          os << '[';
          for (int64_t i = 0; i < v.numElements(); ++i) {
            if (i)
              os << ", ";
            if (isFloat(v.dtype()))
              os << formatDouble(v.at(i));
            else
              os << (int64_t)v.at(i);
          }
          os << ']';
        }
      },
      a);
}

} // namespace graphc
