//===- MemoryLimit.cpp ----------------------------------------------------===//

#include "ir/MemoryLimit.h"

#include "ir/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <atomic>
#include <cmath>
#include <iterator>

namespace graphc {
namespace {

std::atomic<int64_t> limit{0};
std::atomic<int64_t> hostBytes{0};

} // namespace

void setMemoryLimit(int64_t bytes) { limit.store(bytes > 0 ? bytes : 0); }
int64_t memoryLimit() { return limit.load(); }

int64_t tensorByteLimit() {
  int64_t l = memoryLimit();
  return l > 0 && l < kMaxTensorBytes ? l : kMaxTensorBytes;
}

std::string tensorLimitText() {
  if (tensorByteLimit() < kMaxTensorBytes)
    return "the --memory-limit of " + bytesText(memoryLimit());
  return "the 1 TiB a tensor may take";
}

llvm::Error checkDeclaredBytes(int64_t bytes, const llvm::Twine &what) {
  int64_t l = memoryLimit();
  if (l == 0 || bytes <= l)
    return llvm::Error::success();
  return makeError(what + " needs " + bytesText(bytes) + ", more than the --memory-limit of " +
                   bytesText(l));
}

llvm::Error reserveHostBytes(int64_t bytes, const llvm::Twine &what) {
  int64_t l = memoryLimit();
  int64_t before = hostBytes.fetch_add(bytes);
  if (l == 0 || before + bytes <= l)
    return llvm::Error::success();
  hostBytes.fetch_sub(bytes);
  if (before == 0)
    return makeError(what + " needs " + bytesText(bytes) + ", more than the --memory-limit of " +
                     bytesText(l));
  return makeError(what + " needs " + bytesText(bytes) + " more with " + bytesText(before) +
                   " already allocated, past the --memory-limit of " + bytesText(l));
}

void releaseHostBytes(int64_t bytes) { hostBytes.fetch_sub(bytes); }

int64_t reservedHostBytes() { return hostBytes.load(); }

llvm::Expected<int64_t> parseByteSize(llvm::StringRef text, llvm::StringRef flag) {
  llvm::StringRef s = text.trim();
  size_t digits = 0;
  while (digits < s.size() && (llvm::isDigit(s[digits]) || s[digits] == '.'))
    ++digits;
  llvm::StringRef number = s.take_front(digits), unit = s.drop_front(digits).trim();
  double value = 0;
  static const struct {
    const char *names[3];
    int shift;
  } kUnits[] = {{{"", "B", ""}, 0},
                {{"K", "KB", "KiB"}, 10},
                {{"M", "MB", "MiB"}, 20},
                {{"G", "GB", "GiB"}, 30},
                {{"T", "TB", "TiB"}, 40}};
  int shift = -1;
  for (const auto &u : kUnits)
    for (const char *name : u.names)
      if ((*name || u.shift == 0) && unit.equals_insensitive(name))
        shift = u.shift;
  if (number.empty() || number.getAsDouble(value) || shift < 0 || !(value > 0))
    return makeError(flag + " " + text +
                     ": expected a positive size such as 512M, 8G or 1.5GiB (1K = 1024 bytes)");
  double bytes = std::ldexp(value, shift);
  if (bytes < 1 || bytes > 9.0e18)
    return makeError(flag + " " + text + ": the size must be between 1 byte and 8 EiB");
  return (int64_t)bytes;
}

llvm::Error applyMemoryLimitFlag(llvm::StringRef text) {
  auto bytes = parseByteSize(text, "--memory-limit");
  if (!bytes)
    return bytes.takeError();
  setMemoryLimit(*bytes);
  return llvm::Error::success();
}

std::string bytesText(int64_t bytes) {
  static const char *const kPrefix[] = {" B", " KiB", " MiB", " GiB", " TiB", " PiB", " EiB"};
  double d = (double)bytes;
  unsigned i = 0;
  while (d >= 1024 && i + 1 < std::size(kPrefix)) {
    d /= 1024;
    ++i;
  }
  if (i == 0)
    return std::to_string(bytes) + kPrefix[0];
  return llvm::formatv("{0:f2}{1}", d, kPrefix[i]).str();
}

} // namespace graphc
