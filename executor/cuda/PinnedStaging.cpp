//===- PinnedStaging.cpp - Page-locked host buffers for copies ------------===//

#include "executor/cuda/PinnedStaging.h"

#include "kernels/cuda/CudaCheck.h"

#include <algorithm>
#include <cstring>

namespace graphc {

PinnedSlots::~PinnedSlots() {
  for (auto &entry : slots_) {
    if (entry.second.done) {
      cudaEventSynchronize(entry.second.done);
      cudaEventDestroy(entry.second.done);
    }
    cudaFreeHost(entry.second.host);
  }
}

llvm::Expected<void *> PinnedSlots::acquire(const void *key, size_t bytes) {
  Slot &s = slots_[key];
  if (s.inFlight) {
    GRAPHC_CUDA_TRY(cudaEventSynchronize(s.done));
    s.inFlight = false;
  }
  if (s.bytes < bytes) {
    if (s.host) {
      GRAPHC_CUDA_TRY(cudaFreeHost(s.host));
      total_ -= s.bytes;
      s.host = nullptr;
      s.bytes = 0;
    }
    GRAPHC_CUDA_TRY(cudaHostAlloc(&s.host, std::max<size_t>(bytes, 1), cudaHostAllocPortable));
    s.bytes = bytes;
    total_ += bytes;
  }
  if (!s.done)
    GRAPHC_CUDA_TRY(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  return s.host;
}

llvm::Error PinnedSlots::release(const void *key, cudaStream_t stream) {
  Slot &s = slots_[key];
  GRAPHC_CUDA_TRY(cudaEventRecord(s.done, stream));
  s.inFlight = true;
  return llvm::Error::success();
}

PinnedBounce::~PinnedBounce() {
  for (int b = 0; b < 2; ++b) {
    if (done_[b]) {
      cudaEventSynchronize(done_[b]);
      cudaEventDestroy(done_[b]);
    }
    if (buf_[b])
      cudaFreeHost(buf_[b]);
  }
}

llvm::Error PinnedBounce::ensure() {
  for (int b = 0; b < 2; ++b) {
    if (!buf_[b])
      GRAPHC_CUDA_TRY(cudaHostAlloc(&buf_[b], chunk_, cudaHostAllocPortable));
    if (!done_[b])
      GRAPHC_CUDA_TRY(cudaEventCreateWithFlags(&done_[b], cudaEventDisableTiming));
  }
  return llvm::Error::success();
}

llvm::Error PinnedBounce::toDevice(void *dst, const void *host, size_t bytes, cudaStream_t stream) {
  if (!bytes)
    return llvm::Error::success();
  if (auto e = ensure())
    return e;
  auto *d = static_cast<char *>(dst);
  auto *h = static_cast<const char *>(host);
  int last = 0;
  for (size_t off = 0, i = 0; off < bytes; off += chunk_, ++i) {
    int b = (int)(i % 2);
    size_t n = std::min(chunk_, bytes - off);
    // The chunk's previous copy (two chunks ago) must have read it.
    GRAPHC_CUDA_TRY(cudaEventSynchronize(done_[b]));
    std::memcpy(buf_[b], h + off, n);
    GRAPHC_CUDA_TRY(cudaMemcpyAsync(d + off, buf_[b], n, cudaMemcpyHostToDevice, stream));
    GRAPHC_CUDA_TRY(cudaEventRecord(done_[b], stream));
    last = b;
  }
  GRAPHC_CUDA_TRY(cudaEventSynchronize(done_[last]));
  return llvm::Error::success();
}

llvm::Error PinnedBounce::toHost(void *host, const void *src, size_t bytes, cudaStream_t stream) {
  if (!bytes)
    return llvm::Error::success();
  if (auto e = ensure())
    return e;
  auto *h = static_cast<char *>(host);
  auto *s = static_cast<const char *>(src);
  size_t chunks = (bytes + chunk_ - 1) / chunk_;
  // Copy chunk i on the GPU while the host drains chunk i-1.
  for (size_t i = 0; i <= chunks; ++i) {
    if (i < chunks) {
      int b = (int)(i % 2);
      size_t off = i * chunk_, n = std::min(chunk_, bytes - off);
      GRAPHC_CUDA_TRY(cudaMemcpyAsync(buf_[b], s + off, n, cudaMemcpyDeviceToHost, stream));
      GRAPHC_CUDA_TRY(cudaEventRecord(done_[b], stream));
    }
    if (i > 0) {
      int b = (int)((i - 1) % 2);
      size_t off = (i - 1) * chunk_, n = std::min(chunk_, bytes - off);
      GRAPHC_CUDA_TRY(cudaEventSynchronize(done_[b]));
      std::memcpy(h + off, buf_[b], n);
    }
  }
  return llvm::Error::success();
}

} // namespace graphc
