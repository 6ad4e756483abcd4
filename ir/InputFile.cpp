#include "ir/InputFile.h"

#include "ir/Diagnostics.h"
#include "ir/MemoryLimit.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace graphc {

namespace {

/// What a file of this mode is, for a message ("a character device").
const char *describe(mode_t mode) {
  if (S_ISREG(mode))
    return "a regular file";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISSOCK(mode))
    return "a socket";
  return "a special file";
}

bool accepts(InputKind kind, mode_t mode) {
  switch (kind) {
  case InputKind::File:
    return S_ISREG(mode);
  case InputKind::FileOrDirectory:
    return S_ISREG(mode) || S_ISDIR(mode);
  case InputKind::Directory:
    return S_ISDIR(mode);
  }
  return false;
}

llvm::Error refused(llvm::StringRef shown, InputKind kind, mode_t mode) {
  const char *wanted = kind == InputKind::File        ? "a regular file"
                       : kind == InputKind::Directory ? "a directory"
                                                      : "a regular file or a directory";
  return makeError("cannot read " + shown + ": it is " + describe(mode) + ", not " + wanted);
}

llvm::Error systemError(llvm::StringRef shown) {
  return makeError("cannot read " + shown + ": " + std::strerror(errno));
}

} // namespace

InputFile::InputFile(InputFile &&o) noexcept
    : path_(std::move(o.path_)), shown_(std::move(o.shown_)), fd_(o.fd_), size_(o.size_),
      directory_(o.directory_) {
  o.fd_ = -1;
}

InputFile &InputFile::operator=(InputFile &&o) noexcept {
  if (this != &o) {
    if (fd_ >= 0)
      ::close(fd_);
    path_ = std::move(o.path_);
    shown_ = std::move(o.shown_);
    fd_ = o.fd_;
    size_ = o.size_;
    directory_ = o.directory_;
    o.fd_ = -1;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

int InputFile::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> InputFile::read(uint64_t offset,
                                                                    uint64_t length) const {
  assert(fd_ >= 0 && "reading a released input");
  if (directory_)
    return makeError("cannot read " + shown_ + ": it is a directory, not a regular file");
  if (offset > size_ || length > size_ - offset)
    return makeError("cannot read " + shown_ + ": bytes " + llvm::Twine(offset) + ".." +
                     llvm::Twine(offset + length) + " lie past its end (" + llvm::Twine(size_) +
                     " bytes)");
  if (int64_t limit = memoryLimit(); limit > 0 && length > (uint64_t)limit)
    return makeError(
        "cannot read " + shown_ + ": " +
        (length == size_ ? llvm::Twine("it is ") : llvm::Twine("the part to read is ")) +
        bytesText((int64_t)length) + ", more than the --memory-limit of " + bytesText(limit));
  if (length == 0)
    return llvm::MemoryBuffer::getMemBuffer("", path_, /*RequiresNullTerminator=*/false);
  auto buf = llvm::MemoryBuffer::getOpenFileSlice(fd_, path_, length, (int64_t)offset);
  if (!buf)
    return makeError("cannot read " + shown_ + ": " + buf.getError().message());
  return std::move(*buf);
}

llvm::Expected<InputFile> openInput(llvm::StringRef path, InputKind kind, llvm::StringRef what) {
  std::string p = path.str();
  std::string shown = what.empty() ? "'" + p + "'" : what.str() + " '" + p + "'";
  struct stat st;
  // Looked at before it is opened, so that a socket is named as one (open
  // fails on it) and nothing is opened that will not be read.
  if (::stat(p.c_str(), &st) != 0)
    return systemError(shown);
  if (!accepts(kind, st.st_mode))
    return refused(shown, kind, st.st_mode);
  // O_NONBLOCK: should the path have become a FIFO since, opening it does
  // not wait for a writer; the check below then refuses it.
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return systemError(shown);
  if (::fstat(fd, &st) != 0) {
    llvm::Error e = systemError(shown);
    ::close(fd);
    return e;
  }
  if (!accepts(kind, st.st_mode)) {
    ::close(fd);
    return refused(shown, kind, st.st_mode);
  }
  bool directory = S_ISDIR(st.st_mode);
  return InputFile(std::move(p), std::move(shown), fd, directory ? 0 : (uint64_t)st.st_size,
                   directory);
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readInputFile(llvm::StringRef path,
                                                                  llvm::StringRef what) {
  auto in = openInput(path, InputKind::File, what);
  if (!in)
    return in.takeError();
  return in->readAll();
}

llvm::Expected<bool> isInputDirectory(llvm::StringRef path) {
  auto in = openInput(path, InputKind::FileOrDirectory);
  if (!in)
    return in.takeError();
  return in->isDirectory();
}

} // namespace graphc
