//===- ConvAlgorithmFile.h - Convolution algorithms kept across runs -*- C++ -*-===//
//
// The cuDNN convolution algorithm chosen for each shape, kept for the whole
// process and, for measured choices (cudnnFind*, timed), in a file that later
// runs read back, so that a measured choice is made once per machine and every
// later run repeats it (PyTorch's cudnn.benchmark measures again in every
// process and may choose differently each time).
//
// Keys: the device context (GPU model, compute capability, cuDNN and CUDA
// runtime versions: a choice holds only where all four are the same) then
// convCacheKey's shape, direction and policy. Devices of one model in one
// process share their choices, so every tower runs the same algorithm.
//
// The file (GRAPHC_CUDNN_CACHE, default $XDG_CACHE_HOME/graphc/ or
// ~/.cache/graphc/cudnn-algorithms.txt; "off" keeps choices in the process) is
// text, one choice a line, sorted by key:
//
//   # graphc cuDNN convolution algorithms 1 ...
//   <key> TAB <algorithm> TAB <math type> TAB <workspace bytes>
//
// It is a cache: a line that does not parse is skipped (the next save drops
// it), a file that cannot be read is taken as empty, and a failed save is a
// note on stderr; none of these stops a run. Saving re-reads the file and keeps
// what other processes (MPI ranks) added since, then replaces it atomically.
// A stored choice whose workspace exceeds this run's budget is not used.
//
// Host code only (no CUDA headers): the host tests check the format.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace graphc {
namespace cuda {

/// One shape's algorithm: cuDNN's algorithm enum and math type as integers.
struct StoredAlgorithm {
  int algo = 0;
  int math = 0;
  uint64_t workspace = 0;
  friend bool operator==(const StoredAlgorithm &a, const StoredAlgorithm &b) {
    return a.algo == b.algo && a.math == b.math && a.workspace == b.workspace;
  }
};

/// Choices by key, in key order (the file's order).
using AlgorithmTable = std::map<std::string, StoredAlgorithm>;

/// The file's text for `table`.
std::string printAlgorithmTable(const AlgorithmTable &table);
/// The choices `text` holds; `skipped` counts lines that did not parse.
AlgorithmTable parseAlgorithmTable(llvm::StringRef text, unsigned *skipped = nullptr);

/// Where measured choices are kept: GRAPHC_CUDNN_CACHE (a path, or "off" for
/// none: the empty string), else $XDG_CACHE_HOME/graphc/cudnn-algorithms.txt,
/// else $HOME/.cache/graphc/cudnn-algorithms.txt, else none.
std::string convAlgorithmFilePath();

/// "NVIDIA H200 sm90 cudnn91400 cudart13000": what a stored choice holds for.
std::string deviceContextKey(llvm::StringRef gpuName, int major, int minor, size_t cudnnVersion,
                             int cudartVersion);

/// The process's choices, read from the file once and written back by save().
class ConvAlgorithmCache {
public:
  /// The process-wide cache on convAlgorithmFilePath().
  static ConvAlgorithmCache &instance();
  /// A cache on `path` (empty: no file), for tests.
  explicit ConvAlgorithmCache(std::string path) : path_(std::move(path)) {}

  std::optional<StoredAlgorithm> find(const std::string &key);
  /// Keeps `choice` for `key` unless a choice kept first (by another thread,
  /// or read from the file) fits in `budget` bytes of workspace, and returns
  /// the one kept, so that every caller runs the same algorithm; a kept one
  /// over the budget is replaced. `persist`: written to the file by save()
  /// (measured choices).
  StoredAlgorithm add(const std::string &key, StoredAlgorithm choice, bool persist,
                      uint64_t budget = UINT64_MAX);
  /// Writes the persisted choices added since the last save, merged with the
  /// file's current contents. Nothing to write: success without touching it.
  llvm::Error save();
  const std::string &path() const { return path_; }

private:
  void loadLocked();

  std::mutex mutex_;
  std::string path_;
  bool loaded_ = false;
  llvm::StringMap<StoredAlgorithm> choices_;
  AlgorithmTable added_; ///< persisted choices not yet saved
};

} // namespace cuda
} // namespace graphc
