//===- InputFile.h - The one way a reader opens what a user names -*- C++ -*-===//
//
// Every reader of a file a user hands us (models in every format, module
// files, checkpoints and their `latest`, cluster and task files, .npy, IDX,
// images, ONNX external data) opens it through openInput. Bytes come only from
// a regular file, and never more than the size it stated when it was opened:
//
//  - a character or block device (/dev/zero, /dev/urandom), a FIFO or a socket
//    is refused with one line naming the file and what it is, before a byte is
//    read; a FIFO is opened without waiting for a writer, so it cannot hang;
//  - a directory is refused where a file is expected, and accepted by the
//    readers that take one (a checkpoint directory, a folder of images);
//  - a whole read is held to the file's size (a file that grows is read to
//    that size) and to the --memory-limit, before anything is allocated.
//
// Fuzzing feeds readers bytes; this is what stands between them and where the
// bytes come from (docs/input-limits.md).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <string>

namespace graphc {

/// What a reader takes at a path.
enum class InputKind { File, FileOrDirectory, Directory };

/// An open input: a regular file with the size it had when opened, or a
/// directory. Owns its descriptor.
class InputFile {
public:
  InputFile(InputFile &&o) noexcept;
  InputFile &operator=(InputFile &&o) noexcept;
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;
  ~InputFile();

  const std::string &path() const { return path_; }
  /// How messages name the file: "'m.onnx'", or "cluster file 'c.json'".
  const std::string &shown() const { return shown_; }
  bool isDirectory() const { return directory_; }
  /// The file's size when it was opened (0 for a directory).
  uint64_t size() const { return size_; }

  /// Bytes [offset, offset + length) of the file, which must lie within the
  /// size it stated; refused past the --memory-limit.
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> read(uint64_t offset, uint64_t length) const;
  /// The whole file: read(0, size()).
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readAll() const { return read(0, size_); }
  /// Hands the descriptor to a reader that streams it (gzip); the caller
  /// closes it.
  int release();

private:
  friend llvm::Expected<InputFile> openInput(llvm::StringRef path, InputKind kind,
                                             llvm::StringRef what);
  InputFile(std::string path, std::string shown, int fd, uint64_t size, bool directory)
      : path_(std::move(path)), shown_(std::move(shown)), fd_(fd), size_(size),
        directory_(directory) {}
  std::string path_, shown_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool directory_ = false;
};

/// Opens `path` for a reader that takes `kind`; anything else (a device, a
/// FIFO, a socket, a directory where a file is expected, a missing file) is
/// one error: "cannot read '/dev/zero': it is a character device, not a
/// regular file". `what`, when given, names the file's role in messages
/// ("cannot read cluster file '/dev/zero': ...").
llvm::Expected<InputFile> openInput(llvm::StringRef path, InputKind kind = InputKind::File,
                                    llvm::StringRef what = "");

/// The whole of a regular file: openInput, then readAll.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readInputFile(llvm::StringRef path,
                                                                  llvm::StringRef what = "");

/// Whether `path` is a directory a reader may take (openInput with
/// FileOrDirectory says so; a missing path or a device is an error).
llvm::Expected<bool> isInputDirectory(llvm::StringRef path);

} // namespace graphc
