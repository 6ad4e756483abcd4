//===- PinnedStaging.h - Page-locked host buffers for copies -----*- C++ -*-===//
//
// Copies between pageable host memory and a GPU are synchronous and slow
// (the driver stages them itself); from page-locked memory they are
// asynchronous DMA. Two kinds of staging:
//
//   - PinnedSlots: one pinned buffer per destination (a Transfer's output,
//     a prefetch buffer), reused every step. Before a slot is refilled, the
//     copy that last read it must be done: its event is waited for on the
//     host (in practice it finished in the previous step).
//   - PinnedBounce: a fixed pair of chunks for blocking copies of any size
//     (copyIn/copyOut, readToHost): the host fills or drains one chunk while
//     the GPU copies the other.
//
// Both allocate with cudaHostAlloc and free in their destructors; callers
// select the right device first. Not thread-safe: each owner holds a mutex.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <cuda_runtime_api.h>

namespace graphc {

class PinnedSlots {
public:
  PinnedSlots() = default;
  PinnedSlots(const PinnedSlots &) = delete;
  PinnedSlots &operator=(const PinnedSlots &) = delete;
  ~PinnedSlots();

  /// The slot for `key` with at least `bytes`, once its previous copy is done.
  llvm::Expected<void *> acquire(const void *key, size_t bytes);
  /// Marks the copy that now reads (or writes) the slot, recorded on `stream`.
  llvm::Error release(const void *key, cudaStream_t stream);
  size_t bytes() const { return total_; }

private:
  struct Slot {
    void *host = nullptr;
    size_t bytes = 0;
    cudaEvent_t done = nullptr;
    bool inFlight = false;
  };
  llvm::DenseMap<const void *, Slot> slots_;
  size_t total_ = 0;
};

class PinnedBounce {
public:
  explicit PinnedBounce(size_t chunkBytes = size_t(8) << 20) : chunk_(chunkBytes) {}
  PinnedBounce(const PinnedBounce &) = delete;
  PinnedBounce &operator=(const PinnedBounce &) = delete;
  ~PinnedBounce();

  /// Blocking host-to-device copy on `stream`.
  llvm::Error toDevice(void *dst, const void *host, size_t bytes, cudaStream_t stream);
  /// Blocking device-to-host copy on `stream`.
  llvm::Error toHost(void *host, const void *src, size_t bytes, cudaStream_t stream);

private:
  llvm::Error ensure();
  size_t chunk_;
  void *buf_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};
};

} // namespace graphc
