//===- Npz.cpp - NumPy .npz archives --------------------------------------===//
//
// The zip format's central directory lists every entry with its sizes and
// the offset of its local header; the data follows that header's name and
// extra field. Sizes come from the central directory (a local header may
// defer them to a data descriptor); ZIP64 puts sizes and offsets that do not
// fit 32 bits in an extra field (id 1) and the directory's own position in a
// ZIP64 end record.
//
//===----------------------------------------------------------------------===//

#include "executor/data/Npz.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/Npy.h"

#include <zlib.h>

namespace graphc {
namespace {

constexpr uint32_t kEndOfDirectory = 0x06054b50, kZip64End = 0x06064b50,
                   kZip64Locator = 0x07064b50, kDirectoryEntry = 0x02014b50,
                   kLocalHeader = 0x04034b50;
constexpr uint32_t kFar = 0xffffffffu;

/// Little-endian fields of the archive, bounds-checked.
class Reader {
public:
  explicit Reader(llvm::StringRef bytes) : bytes_(bytes) {}
  bool has(uint64_t at, uint64_t n) const { return at <= bytes_.size() && n <= bytes_.size() - at; }
  uint64_t get(uint64_t at, unsigned n) const {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; ++i)
      v |= (uint64_t)(unsigned char)bytes_[at + i] << (8 * i);
    return v;
  }
  llvm::StringRef slice(uint64_t at, uint64_t n) const { return bytes_.substr(at, n); }
  size_t size() const { return bytes_.size(); }

private:
  llvm::StringRef bytes_;
};

struct Entry {
  std::string name;
  uint64_t method = 0, flags = 0, crc = 0, packed = 0, size = 0, header = 0;
};

struct Directory {
  uint64_t entries = 0, at = 0, bytes = 0;
};

llvm::Expected<Directory> findDirectory(const Reader &r, const llvm::Twine &why) {
  // The end record is the last 22 bytes but for a comment of up to 64 KiB.
  if (r.size() < 22)
    return makeError(why + "too short for a zip archive");
  for (uint64_t at = r.size() - 22;; --at) {
    if (r.get(at, 4) == kEndOfDirectory) {
      Directory d{r.get(at + 10, 2), r.get(at + 16, 4), r.get(at + 12, 4)};
      if (d.entries == 0xffff || d.at == kFar || d.bytes == kFar) {
        if (at < 20 || r.get(at - 20, 4) != kZip64Locator)
          return makeError(why + "a ZIP64 archive without its end locator");
        const uint64_t end = r.get(at - 12, 8);
        if (!r.has(end, 56) || r.get(end, 4) != kZip64End)
          return makeError(why + "the ZIP64 end record is missing");
        d = {r.get(end + 32, 8), r.get(end + 48, 8), r.get(end + 40, 8)};
      }
      if (!r.has(d.at, d.bytes))
        return makeError(why + "the central directory lies outside the file (truncated?)");
      return d;
    }
    if (at == 0 || r.size() - at > 22 + 0xffff)
      return makeError(why + "not a zip archive (no end of central directory)");
  }
}

/// The central directory's entries, with ZIP64 sizes resolved.
llvm::Expected<std::vector<Entry>> readEntries(const Reader &r, const Directory &d,
                                               const llvm::Twine &why) {
  std::vector<Entry> out;
  uint64_t at = d.at;
  for (uint64_t i = 0; i < d.entries; ++i) {
    if (!r.has(at, 46) || r.get(at, 4) != kDirectoryEntry)
      return makeError(why + "central directory entry " + llvm::Twine(i) + " is malformed");
    Entry e;
    e.flags = r.get(at + 8, 2);
    e.method = r.get(at + 10, 2);
    e.crc = r.get(at + 16, 4);
    e.packed = r.get(at + 20, 4);
    e.size = r.get(at + 24, 4);
    e.header = r.get(at + 42, 4);
    const uint64_t nameLen = r.get(at + 28, 2), extraLen = r.get(at + 30, 2),
                   commentLen = r.get(at + 32, 2);
    if (!r.has(at + 46, nameLen + extraLen + commentLen))
      return makeError(why + "central directory entry " + llvm::Twine(i) + " is truncated");
    e.name = r.slice(at + 46, nameLen).str();
    // ZIP64: the 32-bit fields at their maximum are in extra field 1, in order.
    for (uint64_t x = at + 46 + nameLen, end = x + extraLen; x + 4 <= end;) {
      const uint64_t id = r.get(x, 2), len = r.get(x + 2, 2);
      uint64_t f = x + 4;
      if (id == 1)
        for (uint64_t *field : {&e.size, &e.packed, &e.header})
          if (*field == kFar && f + 8 <= x + 4 + len) {
            *field = r.get(f, 8);
            f += 8;
          }
      x += 4 + len;
    }
    out.push_back(std::move(e));
    at += 46 + nameLen + extraLen + commentLen;
  }
  return out;
}

llvm::Expected<std::string> inflateRaw(llvm::StringRef packed, uint64_t size) {
  std::string out(size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
    return makeError("zlib could not start");
  z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(packed.data()));
  z.avail_in = (uInt)packed.size();
  z.next_out = reinterpret_cast<Bytef *>(out.data());
  z.avail_out = (uInt)size;
  const int rc = inflate(&z, Z_FINISH);
  const uint64_t produced = z.total_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != size)
    return makeError("its deflated data is corrupt or truncated");
  return out;
}

/// An entry's uncompressed bytes, checked against its CRC-32.
llvm::Expected<std::string> entryBytes(const Reader &r, const Entry &e) {
  if (e.flags & 1)
    return makeError("it is encrypted");
  if (!r.has(e.header, 30) || r.get(e.header, 4) != kLocalHeader)
    return makeError("its local header is missing");
  const uint64_t data = e.header + 30 + r.get(e.header + 26, 2) + r.get(e.header + 28, 2);
  if (!r.has(data, e.packed))
    return makeError("its data is truncated");
  if (e.size > ((uint64_t)1 << 40))
    return makeError("it is larger than graphc reads (" + llvm::Twine(e.size) + " bytes)");
  std::string bytes;
  if (e.method == 0) {
    if (e.packed != e.size)
      return makeError("a stored entry whose sizes differ");
    llvm::StringRef stored = r.slice(data, e.packed);
    bytes.assign(stored.begin(), stored.end());
  } else if (e.method == 8) {
    auto inflated = inflateRaw(r.slice(data, e.packed), e.size);
    if (!inflated)
      return inflated.takeError();
    bytes = std::move(*inflated);
  } else {
    return makeError("compression method " + llvm::Twine(e.method) +
                     " (numpy writes stored or deflated entries)");
  }
  uLong crc = 0;
  for (size_t at = 0; at < bytes.size(); at += 1u << 30) {
    const size_t n = std::min<size_t>(bytes.size() - at, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef *>(bytes.data() + at), (uInt)n);
  }
  if (crc != e.crc)
    return makeError("its CRC-32 does not match (the file is corrupt)");
  return bytes;
}

std::string notUsable(llvm::StringRef name) {
  return ("'" + name + "' is not a usable .npz file: ").str();
}

llvm::Expected<std::vector<Entry>> directoryOf(const Reader &r, llvm::StringRef name) {
  auto dir = findDirectory(r, notUsable(name));
  if (!dir)
    return dir.takeError();
  return readEntries(r, *dir, notUsable(name));
}

} // namespace

llvm::Expected<NpzArrays> parseNpz(llvm::StringRef bytes, llvm::StringRef name) {
  const std::string why = notUsable(name);
  Reader r(bytes);
  auto entries = directoryOf(r, name);
  if (!entries)
    return entries.takeError();
  NpzArrays arrays;
  for (const Entry &e : *entries) {
    llvm::StringRef key(e.name);
    if (!key.consume_back(".npy"))
      return makeError(why + "entry '" + printable(e.name) + "' is not a .npy array");
    auto raw = entryBytes(r, e);
    if (!raw)
      return makeError(why + "entry '" + printable(e.name) + "': " + llvm::toString(raw.takeError()));
    auto t = parseNpy(*raw, name.str() + ":" + e.name);
    if (!t)
      return t.takeError();
    arrays.emplace_back(key.str(), std::move(*t));
  }
  if (arrays.empty())
    return makeError(why + "it holds no arrays");
  return arrays;
}

llvm::Expected<NpzArrays> readNpz(llvm::StringRef path) {
  auto buf = readInputFile(path);
  if (!buf)
    return buf.takeError();
  return parseNpz((*buf)->getBuffer(), path);
}

llvm::Expected<std::vector<std::string>> npzArrayNames(llvm::StringRef path) {
  auto buf = readInputFile(path);
  if (!buf)
    return buf.takeError();
  auto entries = directoryOf(Reader((*buf)->getBuffer()), path);
  if (!entries)
    return entries.takeError();
  std::vector<std::string> names;
  for (const Entry &e : *entries)
    names.push_back(llvm::StringRef(e.name).drop_back(e.name.size() >= 4 ? 4 : 0).str());
  return names;
}

} // namespace graphc
