//===- IdxDataset.cpp - MNIST-style IDX files (Fashion-MNIST) -------------===//
//
// The whole file is read at open (47 MB for Fashion-MNIST's training images,
// about a quarter of a second); the buffer grows as data arrives rather than
// trusting the header's size, so a malformed header cannot ask for terabytes.
//
//===----------------------------------------------------------------------===//
#include "executor/data/IdxDataset.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/MemoryLimit.h"
#include "ir/Type.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <zlib.h>

#include <algorithm>
#include <unistd.h>

namespace graphc {

namespace {

constexpr uint8_t kUnsignedByte = 0x08;

struct GzFile {
  gzFile f = nullptr;
  ~GzFile() {
    if (f)
      gzclose(f);
  }
};

std::string hex32(uint32_t v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format_hex(v, 10);
  return s;
}

/// Reads up to `n` bytes; fewer only at the end of the data.
llvm::Expected<size_t> readBytes(GzFile &file, llvm::StringRef path, uint8_t *dst, size_t n) {
  size_t done = 0;
  while (done < n) {
    unsigned want = (unsigned)std::min<size_t>(n - done, 1u << 20);
    int got = gzread(file.f, dst + done, want);
    if (got < 0) {
      int code = 0;
      const char *msg = gzerror(file.f, &code);
      return makeError(path + ": cannot read: " + (msg ? msg : "unknown zlib error"));
    }
    if (got == 0)
      break;
    done += (size_t)got;
  }
  return done;
}

/// zlib reports a gzip stream cut short as Z_BUF_ERROR after the last read.
std::string streamProblem(GzFile &file) {
  int code = Z_OK;
  const char *msg = gzerror(file.f, &code);
  if (code == Z_OK || !msg)
    return "";
  return std::string(" (") + msg + ")";
}

} // namespace

llvm::Expected<IdxArray> readIdxFile(llvm::StringRef path, unsigned rank) {
  auto in = openInput(path);
  if (!in)
    return in.takeError();
  GzFile file;
  int fd = in->release();
  file.f = gzdopen(fd, "rb"); // owns fd from here
  if (!file.f) {
    ::close(fd);
    return makeError(path + ": cannot open");
  }
  gzbuffer(file.f, 1 << 18);

  uint8_t header[4 + 4 * 4] = {};
  size_t headerBytes = 4 + 4 * (size_t)rank;
  assert(headerBytes <= sizeof(header));
  auto got = readBytes(file, path, header, headerBytes);
  if (!got)
    return got.takeError();
  if (*got < 4)
    return makeError(path + ": not an IDX file: only " + llvm::Twine(*got) + " bytes" +
                     streamProblem(file));
  uint32_t magic = ((uint32_t)header[0] << 24) | ((uint32_t)header[1] << 16) |
                   ((uint32_t)header[2] << 8) | header[3];
  uint32_t expected = ((uint32_t)kUnsignedByte << 8) | rank;
  if (magic != expected)
    return makeError(path + ": bad magic number " + hex32(magic) + " (expected " + hex32(expected) +
                     ": unsigned bytes, " + llvm::Twine(rank) + " dimensions)");
  if (*got < headerBytes)
    return makeError(path + ": truncated header: " + llvm::Twine(*got) + " of " +
                     llvm::Twine(headerBytes) + " bytes" + streamProblem(file));

  IdxArray a;
  uint64_t total = 1;
  for (unsigned d = 0; d < rank; ++d) {
    const uint8_t *p = header + 4 + 4 * d;
    uint32_t n = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    if (n == 0 || n > (1u << 30))
      return makeError(path + ": dimension " + llvm::Twine(d) + " has size " + llvm::Twine(n));
    a.dims.push_back(n);
    total *= n;
    if (total > (uint64_t)1 << 36)
      return makeError(path + ": the header declares more than 2^36 elements");
  }
  if (auto e = checkDeclaredBytes((int64_t)total,
                                  path + ": the header's " + shapeToString(a.dims) + " bytes"))
    return e;

  // Grow as data arrives (see the file comment), in steps doubling from 64 KiB
  // to 16 MiB, so that a short file whose header declares much costs little.
  size_t step = 64u << 10;
  while (a.data.size() < total) {
    size_t have = a.data.size();
    size_t want = std::min<size_t>(total - have, step);
    step = std::min<size_t>(step * 2, 16u << 20);
    a.data.resize(have + want);
    auto n = readBytes(file, path, a.data.data() + have, want);
    if (!n)
      return n.takeError();
    if (*n < want) {
      a.data.resize(have + *n);
      return makeError(path + ": truncated: the header declares " + llvm::Twine(total) +
                       " elements but the file holds " + llvm::Twine(a.data.size()) +
                       streamProblem(file));
    }
  }
  uint8_t extra = 0;
  auto n = readBytes(file, path, &extra, 1);
  if (!n)
    return n.takeError();
  if (*n != 0)
    return makeError(path + ": trailing data after the " + llvm::Twine(total) +
                     " elements the header declares");
  return a;
}

namespace {

/// `dir/name.gz`, else `dir/name`, else an error naming both.
llvm::Expected<std::string> findIdxFile(llvm::StringRef dir, const llvm::Twine &name) {
  llvm::SmallString<256> gz(dir), plain(dir);
  llvm::sys::path::append(gz, name + ".gz");
  llvm::sys::path::append(plain, name);
  if (llvm::sys::fs::exists(gz))
    return std::string(gz);
  if (llvm::sys::fs::exists(plain))
    return std::string(plain);
  return makeError("fashion-mnist: neither " + gz + " nor " + plain + " exists" +
                   (dir == kFashionMnistDir ? " (install Debian's dataset-fashion-mnist)" : ""));
}

} // namespace

llvm::Expected<std::unique_ptr<IdxDataset>> IdxDataset::open(llvm::StringRef dir, Split split) {
  if (!llvm::sys::fs::is_directory(dir))
    return makeError("fashion-mnist: " + dir + " is not a directory" +
                     (dir == kFashionMnistDir ? " (install Debian's dataset-fashion-mnist)" : ""));
  llvm::StringRef prefix = split == Split::Train ? "train" : "t10k";
  auto imagesPath = findIdxFile(dir, prefix + "-images-idx3-ubyte");
  if (!imagesPath)
    return imagesPath.takeError();
  auto labelsPath = findIdxFile(dir, prefix + "-labels-idx1-ubyte");
  if (!labelsPath)
    return labelsPath.takeError();

  auto images = readIdxFile(*imagesPath, 3);
  if (!images)
    return images.takeError();
  auto labels = readIdxFile(*labelsPath, 1);
  if (!labels)
    return labels.takeError();
  if (images->dims[0] != labels->dims[0])
    return makeError(*imagesPath + " holds " + llvm::Twine(images->dims[0]) + " images but " +
                     *labelsPath + " holds " + llvm::Twine(labels->dims[0]) + " labels");
  for (size_t i = 0; i < labels->data.size(); ++i)
    if (labels->data[i] >= kClasses)
      return makeError(*labelsPath + ": label " + llvm::Twine((unsigned)labels->data[i]) +
                       " of sample " + llvm::Twine(i) + " is outside [0, " + llvm::Twine(kClasses) +
                       ")");

  std::unique_ptr<IdxDataset> ds(new IdxDataset());
  ds->dir_ = dir.str();
  ds->split_ = split;
  ds->count_ = images->dims[0];
  ds->rows_ = images->dims[1];
  ds->cols_ = images->dims[2];
  ds->images_ = std::move(images->data);
  ds->labels_ = std::move(labels->data);
  return ds;
}

std::string IdxDataset::describe() const {
  return "fashion-mnist " + splitName(split_).str() + " (" + dir_ + ", " + std::to_string(count_) +
         " samples)";
}

Normalization IdxDataset::normalization() const {
  Normalization n;
  n.mean.push_back(kMean);
  n.std.push_back(kStd);
  return n;
}

llvm::Error IdxDataset::load(int64_t index, float *pixels, int64_t &label) const {
  assert(index >= 0 && index < count_);
  // (v / 255 - mean) / std as one multiply-add per pixel.
  const float scale = 1.0f / (255.0f * kStd), shift = -kMean / kStd;
  const uint8_t *src = images_.data() + index * rows_ * cols_;
  for (int64_t i = 0, n = rows_ * cols_; i < n; ++i)
    pixels[i] = (float)src[i] * scale + shift;
  label = labels_[index];
  return llvm::Error::success();
}

} // namespace graphc
