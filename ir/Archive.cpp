#include "ir/Archive.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/OutputFile.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CRC.h"

namespace graphc {

namespace {

constexpr llvm::StringLiteral kMagicPrefix = "GRPHCAR";
constexpr llvm::StringLiteral kEnd = "GRPHCEND";
/// Magic, header size, header checksum, end marker.
constexpr size_t kFixedBytes = 8 + 8 + 4 + 8;
constexpr unsigned kMaxRank = 8;

uint32_t crc(llvm::StringRef bytes) {
  return llvm::crc32(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
}

class Writer {
public:
  void bytes(const void *p, size_t n) { out.append(static_cast<const char *>(p), n); }
  template <typename T> void pod(T v) { bytes(&v, sizeof(T)); }
  std::string out;
};

/// Reads the header, whose checksum has already been checked; every length
/// is still checked against what is left, so no declared size is trusted.
class HeaderReader {
public:
  HeaderReader(llvm::StringRef data, llvm::StringRef path) : data_(data), path_(path) {}
  template <typename T> llvm::Expected<T> pod() {
    if (auto e = need(sizeof(T)))
      return e;
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  llvm::Expected<llvm::StringRef> bytes(uint64_t n) {
    if (auto e = need(n))
      return e;
    llvm::StringRef s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  bool atEnd() const { return pos_ == data_.size(); }
  size_t pos() const { return pos_; }

private:
  llvm::Error need(uint64_t n) {
    if (n <= data_.size() - pos_)
      return llvm::Error::success();
    return makeError("'" + path_ + "': the header is malformed (it declares " + llvm::Twine(n) +
                     " bytes at header offset " + llvm::Twine(pos_) + ", past its end)");
  }
  llvm::StringRef data_, path_;
  size_t pos_ = 0;
};

struct Entry {
  std::string name;
  TensorType type;
  uint64_t bytes = 0;
  uint32_t checksum = 0;
  size_t checksumAt = 0; ///< the checksum's file offset
};

struct Parsed {
  std::string text;
  std::vector<Entry> entries;
  size_t dataStart = 0; ///< file offset of the first tensor's data
};

bool printable(llvm::StringRef s) {
  return llvm::all_of(s, [](char c) { return llvm::isPrint(c); });
}

llvm::Error readEntry(HeaderReader &r, llvm::StringRef path, uint64_t index, Entry &e) {
  auto nameLen = r.pod<uint32_t>();
  if (!nameLen)
    return nameLen.takeError();
  auto name = r.bytes(*nameLen);
  if (!name)
    return name.takeError();
  if (name->empty() || !printable(*name))
    return makeError("'" + path + "': tensor " + llvm::Twine(index) +
                     " has an empty name or one with unprintable bytes");
  e.name = name->str();
  auto where = [&]() -> std::string { return ("'" + path + "': tensor '" + e.name + "'").str(); };
  auto dt = r.pod<uint8_t>();
  if (!dt)
    return dt.takeError();
  auto rank = r.pod<uint8_t>();
  if (!rank)
    return rank.takeError();
  if (*dt > (uint8_t)DType::Bool)
    return makeError(where() + " has an unknown dtype (" + llvm::Twine(*dt) + ")");
  if (*rank > kMaxRank)
    return makeError(where() + " has rank " + llvm::Twine(*rank) + " (at most " +
                     llvm::Twine(kMaxRank) + ")");
  Dims dims;
  uint64_t elements = 1;
  bool overflow = false;
  for (unsigned d = 0; d < *rank; ++d) {
    auto v = r.pod<int64_t>();
    if (!v)
      return v.takeError();
    if (*v < 0)
      return makeError(where() + " has a negative dimension (" + llvm::Twine(*v) + ")");
    overflow |= __builtin_mul_overflow(elements, (uint64_t)*v, &elements);
    dims.push_back(*v);
  }
  e.type = TensorType((DType)*dt, dims);
  uint64_t want = 0;
  overflow |= __builtin_mul_overflow(elements, (uint64_t)dtypeSize(e.type.dtype), &want);
  auto nbytes = r.pod<uint64_t>();
  if (!nbytes)
    return nbytes.takeError();
  e.checksumAt = 16 + r.pos();
  auto sum = r.pod<uint32_t>();
  if (!sum)
    return sum.takeError();
  if (overflow || *nbytes != want)
    return makeError(where() + " declares " + llvm::Twine(*nbytes) + " bytes of data for type " +
                     toString(e.type) +
                     (overflow ? " (whose size overflows)" : ", which needs " + llvm::Twine(want)));
  e.bytes = *nbytes;
  e.checksum = *sum;
  return llvm::Error::success();
}

/// Checks the magic, the version and the header's checksum (unless told not
/// to), and reads the header. Says nothing yet about the data after it.
llvm::Expected<Parsed> parseHeader(llvm::StringRef data, llvm::StringRef path,
                                   bool checkSum = true) {
  if (!data.startswith(kMagicPrefix))
    return makeError("'" + path + "' is not a graphc module or checkpoint file");
  if (data.size() < 8)
    return makeError("'" + path + "' is truncated (" + llvm::Twine(data.size()) + " bytes)");
  char v = data[7];
  if (v != '0' + kArchiveVersion) {
    std::string which = llvm::isPrint(v) ? std::string("version ") + v
                                         : "an unknown version (byte " + std::to_string(v) + ")";
    if (v == '1')
      which += " (one checksum for the whole file, written by an older graphc)";
    return makeError("'" + path + "' is a graphc archive of format " + which +
                     "; this graphc reads format version " + llvm::Twine(kArchiveVersion) +
                     ": write the module or checkpoint again with this graphc");
  }
  if (data.size() < kFixedBytes)
    return makeError("'" + path + "' is truncated (" + llvm::Twine(data.size()) +
                     " bytes; the smallest archive has " + llvm::Twine(kFixedBytes) + ")");
  uint64_t headerBytes;
  std::memcpy(&headerBytes, data.data() + 8, 8);
  if (headerBytes > data.size() - kFixedBytes)
    return makeError("'" + path + "' is truncated or corrupt: its header declares " +
                     llvm::Twine(headerBytes) + " bytes, the file has " + llvm::Twine(data.size()));
  size_t headerEnd = 16 + headerBytes;
  uint32_t stored;
  std::memcpy(&stored, data.data() + headerEnd, 4);
  if (checkSum && crc(data.take_front(headerEnd)) != stored)
    return makeError("'" + path + "': the header is corrupt (checksum mismatch)");

  HeaderReader r(data.substr(16, headerBytes), path);
  Parsed p;
  auto textLen = r.pod<uint64_t>();
  if (!textLen)
    return textLen.takeError();
  auto text = r.bytes(*textLen);
  if (!text)
    return text.takeError();
  p.text = text->str();
  auto count = r.pod<uint64_t>();
  if (!count)
    return count.takeError();
  // Every entry takes at least 18 bytes: a bound before reserving.
  if (*count > headerBytes / 18)
    return makeError("'" + path + "': the header declares " + llvm::Twine(*count) +
                     " tensors, more than its " + llvm::Twine(headerBytes) + " bytes can hold");
  p.entries.resize(*count);
  llvm::StringSet<> seen;
  for (uint64_t i = 0; i < *count; ++i) {
    if (auto e = readEntry(r, path, i, p.entries[i]))
      return e;
    if (!seen.insert(p.entries[i].name).second)
      return makeError("'" + path + "': tensor '" + p.entries[i].name + "' appears twice");
  }
  if (!r.atEnd())
    return makeError("'" + path + "': the header is malformed (bytes after its last tensor)");
  p.dataStart = headerEnd + 4;
  return p;
}

llvm::Expected<Archive> read(llvm::StringRef path) {
  auto buf = readInputFile(path);
  if (!buf)
    return buf.takeError();
  llvm::StringRef data = (*buf)->getBuffer();
  auto p = parseHeader(data, path);
  if (!p)
    return p.takeError();
  Archive a;
  a.text = std::move(p->text);
  size_t pos = p->dataStart;
  std::vector<std::string> corrupt;
  for (const Entry &e : p->entries) {
    if (e.bytes > data.size() - pos)
      return makeError("'" + path + "' is truncated: tensor '" + e.name + "' (" + toString(e.type) +
                       ") needs bytes " + llvm::Twine(pos) + ".." + llvm::Twine(pos + e.bytes) +
                       ", the file ends at " + llvm::Twine(data.size()));
    llvm::StringRef bytes = data.substr(pos, e.bytes);
    pos += e.bytes;
    if (crc(bytes) != e.checksum) {
      corrupt.push_back(e.name);
      continue;
    }
    Tensor t(e.type);
    std::memcpy(t.raw(), bytes.data(), bytes.size());
    a.tensors.push_back({e.name, std::move(t)});
  }
  if (!corrupt.empty()) {
    size_t shown = std::min<size_t>(corrupt.size(), 10);
    return makeError("'" + path + "': " +
                     (corrupt.size() == 1 ? "tensor '" + corrupt[0] + "' is"
                                          : llvm::Twine(corrupt.size()) + " tensors are") +
                     " corrupt (checksum mismatch)" +
                     (corrupt.size() == 1
                          ? ""
                          : ": " + llvm::join(corrupt.begin(), corrupt.begin() + shown, ", ") +
                                (shown < corrupt.size() ? ", ..." : "")));
  }
  if (data.size() - pos < kEnd.size())
    return makeError("'" + path +
                     "' is truncated: the end marker after the last tensor is missing");
  if (data.substr(pos, kEnd.size()) != kEnd)
    return makeError("'" + path + "' is corrupt: no end marker after the last tensor");
  if (pos + kEnd.size() != data.size())
    return makeError("'" + path + "' is corrupt: " + llvm::Twine(data.size() - pos - kEnd.size()) +
                     " unexpected bytes after the end marker");
  return a;
}

} // namespace

llvm::Error writeArchive(llvm::StringRef path, const Archive &a) {
  // The header in three pieces, so that the text (most of a module file) is
  // written from where it is rather than copied: magic and sizes, the text,
  // the tensor table and the checksum of all three.
  Writer head, table;
  head.bytes(kMagicPrefix.data(), kMagicPrefix.size());
  head.pod<char>('0' + kArchiveVersion);
  head.pod<uint64_t>(0); // the header's size, filled in below
  head.pod<uint64_t>(a.text.size());
  table.pod<uint64_t>(a.tensors.size());
  for (const NamedTensor &t : a.tensors) {
    table.pod<uint32_t>(t.name.size());
    table.bytes(t.name.data(), t.name.size());
    table.pod<uint8_t>((uint8_t)t.tensor.dtype());
    table.pod<uint8_t>((uint8_t)t.tensor.shape().size());
    for (int64_t d : t.tensor.shape())
      table.pod<int64_t>(d);
    table.pod<uint64_t>(t.tensor.bytes());
    table.pod<uint32_t>(
        crc(llvm::StringRef(static_cast<const char *>(t.tensor.raw()), t.tensor.bytes())));
  }
  uint64_t headerBytes = head.out.size() - 16 + a.text.size() + table.out.size();
  std::memcpy(&head.out[8], &headerBytes, 8);
  uint32_t sum = 0;
  for (llvm::StringRef piece :
       {llvm::StringRef(head.out), llvm::StringRef(a.text), llvm::StringRef(table.out)})
    sum = llvm::crc32(sum, llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(piece.data()),
                                                   piece.size()));
  table.pod<uint32_t>(sum);
  std::vector<llvm::StringRef> pieces{head.out, a.text, table.out};
  for (const NamedTensor &t : a.tensors)
    pieces.emplace_back(static_cast<const char *>(t.tensor.raw()), t.tensor.bytes());
  pieces.push_back(kEnd);
  return writeOutputFile(path, pieces);
}

bool isArchiveFile(llvm::StringRef path) {
  auto in = openInput(path);
  if (!in) {
    llvm::consumeError(in.takeError()); // the reader that follows names the problem
    return false;
  }
  auto buf = in->read(0, std::min<uint64_t>(in->size(), kMagicPrefix.size()));
  if (!buf) {
    llvm::consumeError(buf.takeError());
    return false;
  }
  return (*buf)->getBuffer().startswith(kMagicPrefix);
}

llvm::Expected<Archive> readArchive(llvm::StringRef path) {
  return read(path);
}

std::string withValidChecksums(llvm::StringRef bytes) {
  std::string out = bytes.str();
  auto p = parseHeader(out, "", /*checkSum=*/false);
  if (!p) {
    llvm::consumeError(p.takeError());
    // The header's own checksum still, where its size fits the file.
    uint64_t headerBytes;
    if (!bytes.startswith(kMagicPrefix) || bytes.size() < kFixedBytes)
      return out;
    std::memcpy(&headerBytes, bytes.data() + 8, 8);
    if (headerBytes > bytes.size() - kFixedBytes)
      return out;
    uint32_t sum = crc(llvm::StringRef(out).take_front(16 + headerBytes));
    std::memcpy(&out[16 + headerBytes], &sum, 4);
    return out;
  }
  size_t pos = p->dataStart;
  for (const Entry &e : p->entries) {
    if (e.bytes > out.size() - pos)
      break;
    uint32_t sum = crc(llvm::StringRef(out).substr(pos, e.bytes));
    std::memcpy(&out[e.checksumAt], &sum, 4);
    pos += e.bytes;
  }
  size_t headerEnd = p->dataStart - 4;
  uint32_t sum = crc(llvm::StringRef(out).take_front(headerEnd));
  std::memcpy(&out[headerEnd], &sum, 4);
  return out;
}

llvm::Expected<ArchiveHeader> readArchiveHeader(llvm::StringRef path) {
  auto buf = readInputFile(path);
  if (!buf)
    return buf.takeError();
  auto p = parseHeader((*buf)->getBuffer(), path);
  if (!p)
    return p.takeError();
  ArchiveHeader h;
  h.text = std::move(p->text);
  for (Entry &e : p->entries)
    h.tensors.push_back({std::move(e.name), std::move(e.type)});
  return h;
}

llvm::Error writeModuleFile(llvm::StringRef path, const Module &m) {
  Archive a;
  a.text = toText(m);
  for (const Variable &v : m.variables())
    if (!v.data.empty())
      a.tensors.push_back({v.name, v.data});
  return writeArchive(path, a);
}

llvm::Expected<std::unique_ptr<Module>> readModuleFile(llvm::StringRef path) {
  auto a = readArchive(path);
  if (!a)
    return a.takeError();
  auto m = parseModule(a->text, path);
  if (!m)
    return m.takeError();
  for (NamedTensor &t : a->tensors) {
    Variable *v = (*m)->findVariable(t.name);
    if (!v)
      return makeError("'" + path + "': tensor '" + t.name + "' is no variable of the module");
    if (v->type != t.tensor.type())
      return makeError("'" + path + "': tensor '" + t.name + "' is " + toString(t.tensor.type()) +
                       ", the module's variable is " + toString(v->type));
    v->data = std::move(t.tensor);
    v->init = Initializer{};
  }
  for (const Variable &v : (*m)->variables())
    if (v.init.fn == "elided" && v.data.empty())
      return makeError("'" + path + "': variable '" + v.name + "' has no data");
  return std::move(*m);
}

} // namespace graphc
