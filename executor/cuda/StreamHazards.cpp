//===- StreamHazards.cpp - Which stream waits for which, per device -------===//
//
// Vector-clock bookkeeping for the rules in StreamHazards.h. Side operations
// are kept (with the byte ranges they touch) until every other stream is
// ordered after them; primary operations are never kept, because rule 2 makes
// every side operation wait for all of them.
//
//===----------------------------------------------------------------------===//

#include "executor/cuda/StreamHazards.h"

#include <algorithm>
#include <cassert>

namespace graphc {

StreamHazards::StreamHazards(unsigned numStreams)
    : numStreams_(numStreams), issued_(numStreams, 0),
      known_(numStreams, std::vector<uint64_t>(numStreams, 0)),
      lastKnew_(numStreams, std::vector<uint64_t>(numStreams, 0)) {
  assert(numStreams >= 1 && "a device has at least its compute stream");
}

void StreamHazards::waitFor(unsigned stream, StreamPoint p, const std::vector<uint64_t> &knew,
                            llvm::SmallVectorImpl<StreamPoint> &waits) {
  std::vector<uint64_t> &mine = known_[stream];
  if (mine[p.stream] >= p.ticket)
    return;
  waits.push_back(p);
  for (unsigned t = 0; t < numStreams_; ++t)
    mine[t] = std::max(mine[t], knew[t]);
  mine[p.stream] = std::max(mine[p.stream], p.ticket);
}

static bool anyOverlap(llvm::ArrayRef<ByteRange> a, llvm::ArrayRef<ByteRange> b) {
  for (const ByteRange &x : a)
    for (const ByteRange &y : b)
      if (x.overlaps(y))
        return true;
  return false;
}

StreamHazards::Issue StreamHazards::issue(unsigned stream, llvm::ArrayRef<ByteRange> reads,
                                          llvm::ArrayRef<ByteRange> writes) {
  assert(stream < numStreams_);
  Issue out;
  // Rule 2: side work comes after all primary work issued before it.
  if (stream != 0 && issued_[0] > 0) {
    std::vector<uint64_t> primaryNow = known_[0];
    waitFor(stream, {0, issued_[0]}, primaryNow, out.waits);
  }
  // Rule 3: latest first, so one wait covers that stream's earlier operations.
  for (size_t i = pending_.size(); i-- > 0;) {
    const Pending &p = pending_[i];
    if (p.stream == stream || known_[stream][p.stream] >= p.ticket)
      continue;
    if (anyOverlap(p.writes, reads) || anyOverlap(p.writes, writes) ||
        anyOverlap(p.reads, writes)) {
      std::vector<uint64_t> knew = p.knew;
      waitFor(stream, {p.stream, p.ticket}, knew, out.waits);
    }
  }
  out.ticket = ++issued_[stream];
  known_[stream][stream] = out.ticket;
  lastKnew_[stream] = known_[stream];
  if (stream != 0)
    pending_.push_back({stream, out.ticket, std::vector<ByteRange>(reads.begin(), reads.end()),
                        std::vector<ByteRange>(writes.begin(), writes.end()), known_[stream]});
  prune();
  return out;
}

llvm::SmallVector<StreamPoint, 4> StreamHazards::join(unsigned stream) {
  llvm::SmallVector<StreamPoint, 4> waits;
  for (unsigned t = 0; t < numStreams_; ++t) {
    if (t == stream || known_[stream][t] >= issued_[t])
      continue;
    // Compute is waited for at its current position; a side stream at its
    // last operation, whose completion event was recorded when it was issued.
    std::vector<uint64_t> knew = t == 0 ? known_[0] : lastKnew_[t];
    waitFor(stream, {t, issued_[t]}, knew, waits);
  }
  prune();
  return waits;
}

void StreamHazards::prune() {
  // A side stream that has issued nothing yet will wait for compute's
  // current position first (rule 2), so compute's knowledge covers it; a
  // stream that only joins (the marker) never needs the byte ranges.
  llvm::erase_if(pending_, [&](const Pending &p) {
    for (unsigned s = 0; s < numStreams_; ++s)
      if (s != p.stream && (s == 0 || issued_[s] > 0) && known_[s][p.stream] < p.ticket)
        return false;
    return true;
  });
}

void StreamHazards::reset() {
  std::fill(issued_.begin(), issued_.end(), 0);
  for (auto &row : known_)
    std::fill(row.begin(), row.end(), 0);
  for (auto &row : lastKnew_)
    std::fill(row.begin(), row.end(), 0);
  pending_.clear();
}

} // namespace graphc
