#include "ir/OutputFile.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace graphc {

namespace {

std::atomic<int64_t> writePauseMs{0};

llvm::Error writeError(llvm::StringRef path, int err) {
  return makeError("cannot write '" + path + "': " + std::strerror(err));
}

/// Where a write goes: replaced by a renamed temporary file, or written in
/// place (see the file comment).
struct Target {
  std::string path;
  bool inPlace = false;
};

/// Names that stand for an open descriptor (/dev/stdout, /dev/fd/3,
/// /proc/self/fd/1) or a kernel file: renaming into them would detach the
/// descriptor from the file, or fail.
bool isDescriptorName(llvm::StringRef path) {
  return path.startswith("/proc/") || path.startswith("/dev/fd/") || path == "/dev/stdin" ||
         path == "/dev/stdout" || path == "/dev/stderr";
}

llvm::Expected<Target> targetOf(llvm::StringRef path) {
  Target t{path.str(), false};
  if (isDescriptorName(path)) {
    t.inPlace = true;
    return t;
  }
  struct stat st;
  if (::stat(t.path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return t; // a new file (a missing directory fails when it is created)
    return writeError(path, errno);
  }
  if (S_ISDIR(st.st_mode))
    return makeError("cannot write '" + path + "': it is a directory");
  if (!S_ISREG(st.st_mode)) {
    t.inPlace = true;
    return t;
  }
  // A link to a regular file: replace the file it names, keep the link.
  struct stat lst;
  if (::lstat(t.path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    char real[PATH_MAX];
    if (!::realpath(t.path.c_str(), real))
      return writeError(path, errno);
    t.path = real;
  }
  return t;
}

/// Writes every piece; pauses half-way when a test asked for it.
int writePieces(int fd, llvm::ArrayRef<llvm::StringRef> pieces, bool mayPause) {
  size_t total = 0, written = 0;
  for (llvm::StringRef piece : pieces)
    total += piece.size();
  const size_t half = total / 2;
  bool paused = !mayPause || writePauseMs == 0;
  for (llvm::StringRef piece : pieces) {
    size_t done = 0;
    while (done < piece.size()) {
      if (!paused && written >= half) {
        paused = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(writePauseMs.load()));
      }
      size_t n = piece.size() - done;
      if (!paused)
        n = std::min(n, half - written);
      ssize_t w = ::write(fd, piece.data() + done, n);
      if (w < 0) {
        if (errno == EINTR)
          continue;
        return errno;
      }
      done += (size_t)w;
      written += (size_t)w;
    }
  }
  return 0;
}

llvm::Error writeInPlace(llvm::StringRef shown, const std::string &path,
                         llvm::ArrayRef<llvm::StringRef> pieces) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return writeError(shown, errno);
  if (int err = writePieces(fd, pieces, /*mayPause=*/false)) {
    ::close(fd);
    return writeError(shown, err);
  }
  if (::close(fd) != 0)
    return writeError(shown, errno);
  return llvm::Error::success();
}

llvm::Error writeReplacing(llvm::StringRef shown, const std::string &path,
                           llvm::ArrayRef<llvm::StringRef> pieces) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto failed = [&](int fd, int err) {
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    return writeError(shown, err);
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return writeError(shown, errno);
  if (int err = writePieces(fd, pieces, /*mayPause=*/true))
    return failed(fd, err);
  if (::fsync(fd) != 0)
    return failed(fd, errno);
  if (::close(fd) != 0)
    return failed(-1, errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return failed(-1, errno);
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

} // namespace

void setWritePauseForTesting(std::chrono::milliseconds pause) {
  writePauseMs = pause.count();
}

void ignoreFileSizeSignal() {
  ::signal(SIGXFSZ, SIG_IGN);
}

llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef bytes) {
  return writeOutputFile(path, llvm::ArrayRef<llvm::StringRef>(bytes));
}

llvm::Error writeOutputFile(llvm::StringRef path, llvm::ArrayRef<llvm::StringRef> pieces) {
  auto target = targetOf(path);
  if (!target)
    return target.takeError();
  return target->inPlace ? writeInPlace(path, target->path, pieces)
                         : writeReplacing(path, target->path, pieces);
}

llvm::Expected<std::unique_ptr<OutputStream>> OutputStream::open(llvm::StringRef path,
                                                                 bool append) {
  auto target = targetOf(path);
  if (!target)
    return target.takeError();
  int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY;
  if (!target->inPlace)
    flags |= O_CREAT | (append ? 0 : O_TRUNC);
  int fd = ::open(target->path.c_str(), flags, 0644);
  if (fd < 0)
    return writeError(path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return writeError(path, err);
  }
  bool regular = S_ISREG(st.st_mode);
  return std::unique_ptr<OutputStream>(
      new OutputStream(path.str(), fd, regular, !regular || st.st_size == 0));
}

OutputStream::~OutputStream() {
  if (fd_ >= 0)
    ::close(fd_);
}

llvm::Error OutputStream::write(llvm::StringRef record) {
  if (fd_ < 0)
    return makeError("cannot write '" + path_ + "': it is closed");
  // Records are appended (O_APPEND), so the file's size is where this one
  // starts.
  struct stat st;
  off_t start = regular_ && ::fstat(fd_, &st) == 0 ? st.st_size : -1;
  if (int err = writePieces(fd_, record, /*mayPause=*/false)) {
    if (start >= 0 && ::ftruncate(fd_, start) != 0) {
      // The cut record stays; the write's own error is the one to report.
    }
    return writeError(path_, err);
  }
  return llvm::Error::success();
}

llvm::Error OutputStream::close() {
  if (fd_ < 0)
    return llvm::Error::success();
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0)
    return writeError(path_, errno);
  return llvm::Error::success();
}

} // namespace graphc
