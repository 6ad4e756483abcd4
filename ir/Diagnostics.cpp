#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

#include <cstdio>

namespace graphc {

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

llvm::Error withContext(llvm::Error e, const llvm::Twine &context) {
  if (!e)
    return e;
  std::string msg = llvm::toString(std::move(e));
  return makeError(context + ": " + msg);
}

std::string printable(llvm::StringRef bytes, size_t max) {
  std::string out;
  for (unsigned char c : bytes) {
    std::string piece;
    if (c == '\n')
      piece = "\\n";
    else if (c == '\\')
      piece = "\\\\";
    else if (c < 0x20 || c >= 0x7f)
      piece = std::string("\\x") + llvm::hexdigit(c >> 4) + llvm::hexdigit(c & 15);
    else
      piece = std::string(1, (char)c);
    if (out.size() + piece.size() > max) {
      out += "...";
      break;
    }
    out += piece;
  }
  return out;
}

llvm::Error oneLine(llvm::Error e) {
  if (!e)
    return e;
  std::string msg = llvm::toString(std::move(e)), out;
  for (unsigned char c : msg) {
    if (c == '\n')
      out += "\\n";
    else if (c < 0x20 || c == 0x7f)
      out += std::string("\\x") + llvm::hexdigit(c >> 4) + llvm::hexdigit(c & 15);
    else
      out += (char)c;
  }
  return makeError(out);
}

std::string secondsText(std::chrono::milliseconds t) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.3g", std::chrono::duration<double>(t).count());
  return buf;
}

} // namespace graphc
