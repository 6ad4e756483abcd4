//===- StreamHazards.h - Which stream waits for which, per device -*- C++ -*-===//
//
// A CUDA device issues work on several streams: kernels on the compute
// stream (the primary), copies and collectives on side streams, so that they
// overlap compute. Streams run independently; this class decides, from the
// bytes each operation reads and writes, which points of other streams an
// operation must wait for. It is pure bookkeeping (no CUDA), so the rules are
// tested without a GPU; CudaDevice turns each dependency into an event wait.
//
// Rules, for an operation on stream S:
//   1. Same stream: issue order, nothing to do.
//   2. A side-stream operation waits for everything issued on the primary
//      stream before it. Side operations read values the primary produced
//      (collective inputs) and write arena bytes that earlier primary kernels
//      may still read (the memory plan reuses bytes by issue order), so only
//      this coarse rule is safe without tracking every kernel's ranges.
//   3. Any operation waits for a side operation of another stream that
//      writes bytes it reads or writes, or reads bytes it writes (RAW, WAW,
//      WAR), unless it is already ordered after it.
//   4. join(S): S waits for everything issued on every stream (an event that
//      marks "all work so far", Device::record()).
// "Ordered after" is tracked with vector clocks: known[S][T] is the last
// ticket of stream T that S's next operation is already ordered after, and a
// wait inherits what the waited-for point knew. A dependency on the primary
// stream is always at its current position (the device records an event
// there on demand); a dependency on a side stream names one operation, whose
// completion the device recorded when it was issued.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <vector>

namespace graphc {

/// Bytes [begin, end) of device memory.
struct ByteRange {
  uintptr_t begin = 0, end = 0;
  static ByteRange of(const void *p, size_t bytes) {
    auto b = reinterpret_cast<uintptr_t>(p);
    return {b, b + bytes};
  }
  bool overlaps(const ByteRange &o) const {
    return begin < o.end && o.begin < end && begin < end && o.begin < o.end;
  }
};

/// A point in a stream: after its operation number `ticket` (1-based).
struct StreamPoint {
  unsigned stream = 0;
  uint64_t ticket = 0;
  bool operator==(const StreamPoint &o) const { return stream == o.stream && ticket == o.ticket; }
};

class StreamHazards {
public:
  /// Streams 0..numStreams-1; stream 0 is the primary (compute) stream.
  explicit StreamHazards(unsigned numStreams);

  struct Issue {
    llvm::SmallVector<StreamPoint, 4> waits; ///< wait for these first
    uint64_t ticket = 0;                     ///< this operation's number on its stream
  };
  /// Plans an operation on `stream` and records it as issued.
  Issue issue(unsigned stream, llvm::ArrayRef<ByteRange> reads, llvm::ArrayRef<ByteRange> writes);

  /// What `stream` must wait for so that its next operation comes after
  /// everything issued so far on every stream; records those waits.
  llvm::SmallVector<StreamPoint, 4> join(unsigned stream);

  /// Everything issued has completed (the device synchronised): forget it.
  void reset();

  unsigned numStreams() const { return numStreams_; }
  /// Operations issued on `stream` since the last reset.
  uint64_t issued(unsigned stream) const { return issued_[stream]; }
  /// Side operations still tracked (tests: that pruning works).
  size_t pendingCount() const { return pending_.size(); }

private:
  struct Pending {
    unsigned stream;
    uint64_t ticket;
    std::vector<ByteRange> reads, writes;
    std::vector<uint64_t> knew; ///< its stream's vector clock once it was issued
  };
  void waitFor(unsigned stream, StreamPoint p, const std::vector<uint64_t> &knew,
               llvm::SmallVectorImpl<StreamPoint> &waits);
  void prune();

  unsigned numStreams_;
  std::vector<uint64_t> issued_;
  std::vector<std::vector<uint64_t>> known_;    ///< known_[S][T]
  std::vector<std::vector<uint64_t>> lastKnew_; ///< S's clock at its last operation
  std::vector<Pending> pending_;                ///< side operations, in issue order
};

} // namespace graphc
