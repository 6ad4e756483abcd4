#include "ir/Archive.h"

#include "ir/Diagnostics.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Random.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <fcntl.h>
#include <unistd.h>

namespace graphc {

static constexpr char kMagic[] = "GRPHCAR1";
static constexpr char kEnd[] = "GRPHCEND";

namespace {
class Writer {
public:
  void bytes(const void *p, size_t n) { out.append(static_cast<const char *>(p), n); }
  template <typename T> void pod(T v) { bytes(&v, sizeof(T)); }
  void str(llvm::StringRef s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  std::string out;
};

class Reader {
public:
  Reader(llvm::StringRef data, llvm::StringRef path) : data_(data), path_(path) {}
  llvm::Error need(size_t n) {
    if (pos_ + n <= data_.size())
      return llvm::Error::success();
    return makeError("'" + path_ + "' is truncated or corrupt (needs " + llvm::Twine(n) +
                     " more bytes at offset " + llvm::Twine(pos_) + ")");
  }
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
  size_t pos() const { return pos_; }

private:
  llvm::StringRef data_, path_;
  size_t pos_ = 0;
};

uint64_t fnv(llvm::StringRef s) { return stableHash(s); }
} // namespace

llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef bytes) {
  std::string tmp = (path + ".tmp." + llvm::Twine(::getpid())).str();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return makeError("cannot write '" + path + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return makeError("cannot write '" + path + "': " + why);
    }
    done += (size_t)n;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return makeError("cannot write '" + path + "': " + why);
  }
  if (::rename(tmp.c_str(), path.str().c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return makeError("cannot write '" + path + "': " + why);
  }
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return llvm::Error::success();
}

llvm::Error writeArchive(llvm::StringRef path, const Archive &a) {
  Writer w;
  w.bytes(kMagic, 8);
  w.str(a.text);
  w.pod<uint64_t>(a.tensors.size());
  for (const NamedTensor &t : a.tensors) {
    w.pod<uint32_t>(t.name.size());
    w.bytes(t.name.data(), t.name.size());
    w.pod<uint8_t>((uint8_t)t.tensor.dtype());
    w.pod<uint8_t>((uint8_t)t.tensor.shape().size());
    for (int64_t d : t.tensor.shape())
      w.pod<int64_t>(d);
    w.pod<uint64_t>(t.tensor.bytes());
    w.bytes(t.tensor.raw(), t.tensor.bytes());
  }
  w.bytes(kEnd, 8);
  w.pod<uint64_t>(fnv(w.out));
  return writeFileAtomically(path, w.out);
}

bool isArchiveFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFileSlice(path, 8, 0);
  return buf && (*buf)->getBuffer() == llvm::StringRef(kMagic, 8);
}

llvm::Expected<Archive> readArchive(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    return makeError("cannot read '" + path + "': " + buf.getError().message());
  llvm::StringRef data = (*buf)->getBuffer();
  if (!data.startswith(llvm::StringRef(kMagic, 8)))
    return makeError("'" + path + "' is not a graphc module or checkpoint file");
  if (data.size() < 8 + 8 + 8 + 16)
    return makeError("'" + path + "' is truncated");
  llvm::StringRef body = data.drop_back(8);
  uint64_t sum;
  std::memcpy(&sum, data.data() + body.size(), 8);
  if (!body.endswith(llvm::StringRef(kEnd, 8)) || fnv(body) != sum)
    return makeError("'" + path + "' is truncated or corrupt (checksum mismatch)");
  Reader r(body.drop_front(8).drop_back(8), path);
  auto textLen = r.pod<uint64_t>();
  if (!textLen)
    return textLen.takeError();
  auto text = r.bytes(*textLen);
  if (!text)
    return text.takeError();
  Archive a;
  a.text = text->str();
  auto count = r.pod<uint64_t>();
  if (!count)
    return count.takeError();
  for (uint64_t i = 0; i < *count; ++i) {
    auto nameLen = r.pod<uint32_t>();
    if (!nameLen)
      return nameLen.takeError();
    auto name = r.bytes(*nameLen);
    if (!name)
      return name.takeError();
    auto dt = r.pod<uint8_t>();
    auto rank = dt ? r.pod<uint8_t>() : llvm::Expected<uint8_t>(dt.takeError());
    if (!rank)
      return rank.takeError();
    if (*dt > (uint8_t)DType::Bool)
      return makeError("'" + path + "': tensor '" + *name + "' has an unknown dtype");
    Dims dims;
    for (unsigned d = 0; d < *rank; ++d) {
      auto v = r.pod<int64_t>();
      if (!v)
        return v.takeError();
      if (*v < 0)
        return makeError("'" + path + "': tensor '" + *name + "' has a negative dimension");
      dims.push_back(*v);
    }
    TensorType type((DType)*dt, dims);
    auto nbytes = r.pod<uint64_t>();
    if (!nbytes)
      return nbytes.takeError();
    if ((int64_t)*nbytes != type.bytes())
      return makeError("'" + path + "': tensor '" + *name + "' has " + llvm::Twine(*nbytes) +
                       " bytes, its type " + toString(type) + " needs " + llvm::Twine(type.bytes()));
    auto raw = r.bytes(*nbytes);
    if (!raw)
      return raw.takeError();
    Tensor t(type);
    std::memcpy(t.raw(), raw->data(), *nbytes);
    a.tensors.push_back({name->str(), std::move(t)});
  }
  return a;
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
    if (!v || v->type != t.tensor.type())
      return makeError("'" + path + "': data for '" + t.name + "' does not match the module");
    v->data = std::move(t.tensor);
    v->init = Initializer{};
  }
  for (const Variable &v : (*m)->variables())
    if (v.init.fn == "elided" && v.data.empty())
      return makeError("'" + path + "': variable '" + v.name + "' has no data");
  return std::move(*m);
}

} // namespace graphc
