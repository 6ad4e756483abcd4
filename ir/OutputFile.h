//===- OutputFile.h - The one way graphc and graphrun write a file -*- C++ -*-===//
//
// Every file the tools write (module files, checkpoints and their `latest`,
// ONNX models, views, .npy outputs, traces, profiles, pass dumps, calibrated
// cluster files, metrics) goes through this writer. It checks every write,
// the flush and the close, and reports a failure in one line naming the file:
// "cannot write 'm.onnx': No space left on device" (a full disk), "...: File
// too large" (a file-size limit), "...: Input/output error".
//
//  - A whole file (writeOutputFile) whose target is a regular file, or does
//    not exist yet, is written beside it, fsynced and renamed over it, then
//    its directory is fsynced: a reader never sees half a file, and what was
//    there survives a failed write or a kill. A symbolic link to a regular
//    file is followed, so the file it names is replaced and the link stays.
//  - A target that is not a regular file (a device such as /dev/full or
//    /dev/null, a FIFO, a terminal) or whose name stands for an open
//    descriptor (/dev/stdout, /dev/fd/N, anything under /proc/) cannot be
//    renamed into: it is written in place (appended to), every write and the
//    close still checked.
//  - A stream of records (OutputStream: --metrics, a record per step) is
//    written a record at a time, each write checked; on a regular file a
//    record that a full disk cuts short is cut off again, so the file always
//    ends at its last whole record.
//
// A file-size limit (ulimit -f) raises SIGXFSZ at the write that passes it,
// which ends a process by default; the tools ignore it
// (ignoreFileSizeSignal), so the write fails with EFBIG and is reported as
// above.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <memory>
#include <string>

namespace graphc {

/// Writes `bytes` as the whole of `path` (see the file comment).
llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef bytes);
/// The same, for bytes given in pieces (written in order, never joined).
llvm::Error writeOutputFile(llvm::StringRef path, llvm::ArrayRef<llvm::StringRef> pieces);

/// A file written a record at a time (see the file comment).
class OutputStream {
public:
  /// Opens `path`, emptying it, or with `append` keeping what it holds. A
  /// directory is refused; a device or FIFO is written in place.
  static llvm::Expected<std::unique_ptr<OutputStream>> open(llvm::StringRef path, bool append);
  ~OutputStream();

  /// Whether the file held nothing when it was opened (a header is due).
  bool startedEmpty() const { return startedEmpty_; }
  /// Writes one record whole, or reports why not (see the file comment).
  llvm::Error write(llvm::StringRef record);
  /// Closes the file, reporting an error the close returns.
  llvm::Error close();

private:
  OutputStream(std::string path, int fd, bool regular, bool startedEmpty)
      : path_(std::move(path)), fd_(fd), regular_(regular), startedEmpty_(startedEmpty) {}
  std::string path_;
  int fd_;
  bool regular_, startedEmpty_;
};

/// Makes a write past a file-size limit fail with EFBIG instead of ending the
/// process with SIGXFSZ. Both tools call it first thing.
void ignoreFileSizeSignal();

/// Tests only (the crash-safety test, through graphrun's environment): every
/// whole-file write pauses this long half-way through its temporary file, so
/// a kill can land inside a write.
void setWritePauseForTesting(std::chrono::milliseconds pause);

} // namespace graphc
