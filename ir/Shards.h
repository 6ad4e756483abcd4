//===- Shards.h - One rank's piece of a tensor split over ranks --*- C++ -*-===//
//
// Sharded optimizer state (passes/AggregateGradients.h) splits a tensor of n
// elements, flattened, over N ranks as evenly as it goes: rank r holds
// elements [n*r/N, n*(r+1)/N). Pieces differ by at most one element and are
// never padded, so a size that does not divide by N needs no special case;
// a tensor smaller than N leaves some ranks an empty piece. The same ranges
// are the CPU all-reduce's per-rank slices (executor/Collectives.cpp), so a
// reduce-scatter sums each element in the order the all-reduce does.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cassert>
#include <cstdint>

namespace graphc {

struct ShardRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

inline ShardRange shardRange(int64_t elements, int64_t rank, int64_t nranks) {
  assert(nranks > 0 && rank >= 0 && rank < nranks && elements >= 0);
  return {elements * rank / nranks, elements * (rank + 1) / nranks};
}

} // namespace graphc
