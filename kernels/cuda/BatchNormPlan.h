//===- BatchNormPlan.h - Batch norm's walk over channels, host and device -*- C++ -*-===//
//
// How the CUDA batch norm (BatchNorm.cu) splits x, seen as [N, C, S] (S: the
// spatial size; stored [N, S, C] when 4-D and channels-last), into work, in
// plain C++ that nvcc and the host compiler both build, so the host tests
// run the same walk, the same sums and the same merge order on the CPU:
//
//  - a position is m = n * S + s (M = N * S of them per channel);
//  - a chunk is `vec` elements consecutive in memory, one kBnChunkBytes load
//    where the shape allows (NCHW: vec consecutive positions of one channel,
//    S a multiple of vec; NHWC: vec consecutive channels of one position, C
//    a multiple of vec), else one element;
//  - a work item is a tile of `tileLen` positions of one channel group
//    (NCHW: one channel; NHWC: `lanes * vec` channels). A block of
//    kBnThreads threads takes items in a grid-stride loop; its threads walk
//    the tile's chunks (NCHW: thread t takes chunks t, t + 256, ...; NHWC:
//    thread t = ty * lanes + tx takes channel chunk tx of rows ty, ty +
//    rowLanes, ...);
//  - the sums of a pass (statistics: x - K and its square, K the channel's
//    first element; gradient: dy' and dy' * (x - mean)) are accumulated per
//    thread in float over kBnFlush chunks, then in double; a block adds its
//    threads' sums in a fixed tree (bnTreeTop), giving one partial per tile
//    and channel (partial[tile * C + c]); the merge adds a channel's tiles
//    in a fixed order (thread t: tiles t, t + 256, ..., then the tree).
//
// Every order above depends on the shape and the layout only: the results
// are the same bits run to run, whatever the grid's block count (the tiles,
// not the blocks, hold the partials), and on every GPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"

#include <cstdint>

namespace graphc {
namespace cuda {

/// Threads per block of every batch-norm kernel.
inline constexpr int kBnThreads = 256;
/// Bytes of a chunk where the shape allows: 8 (4 f16 or bf16, 2 f32) keeps
/// a thread's NHWC sums (two per channel of its chunk) in registers at 50%
/// occupancy, and a warp's loads still fill whole sectors. 16 is the other
/// candidate for the GPU run to measure.
inline constexpr int kBnChunkBytes = 8;
/// Chunks a thread sums in float before adding them to its double sums.
inline constexpr int kBnFlush = 8;
/// Work items the tiling aims at (a few waves of blocks on a large GPU).
inline constexpr int64_t kBnTargetItems = 2048;
/// Least chunks per thread and tile.
inline constexpr int64_t kBnMinSweeps = 4;

struct BnPlan {
  int64_t n = 0, c = 0, s = 1;
  bool channelsLast = false; ///< stored [N, S, C] (4-D NHWC)
  int vec = 1;               ///< elements per chunk
  int lanes = 1;             ///< NHWC: threads across a group's channel chunks; NCHW: 1
  int rowLanes = kBnThreads; ///< threads along the positions
  int64_t groups = 0;        ///< NHWC: channel groups of lanes * vec; NCHW: C
  int64_t tileLen = 0;       ///< positions per tile
  int64_t tiles = 0;         ///< tiles per channel (group)

  GRAPHC_HD int64_t positions() const { return n * s; }
  GRAPHC_HD int64_t elements() const { return n * c * s; }
  GRAPHC_HD int64_t items() const { return tiles * groups; }
  /// Partial sums: one per tile and channel.
  GRAPHC_HD int64_t partials() const { return tiles * c; }
  /// Positions one sweep of a block covers (a tile is a multiple of it).
  GRAPHC_HD int64_t sweep() const { return channelsLast ? rowLanes : (int64_t)rowLanes * vec; }
};

/// The plan of x as [n, c, s] with elements of `elementBytes`.
inline BnPlan planBatchNorm(int64_t n, int64_t c, int64_t s, bool channelsLast, int elementBytes) {
  BnPlan p;
  p.n = n;
  p.c = c;
  p.s = s;
  p.channelsLast = channelsLast;
  const int wide = kBnChunkBytes / elementBytes;
  p.vec = (channelsLast ? c : s) % wide == 0 ? wide : 1;
  if (channelsLast) {
    // Lanes: the most channel chunks up to a warp that divide them evenly.
    int64_t chunks = c / p.vec;
    int64_t lanes = chunks <= 32 ? chunks : 32;
    while (lanes > 1 && chunks % lanes)
      --lanes;
    p.lanes = (int)(lanes < 1 ? 1 : lanes);
    p.rowLanes = kBnThreads / p.lanes;
    p.groups = chunks / p.lanes;
  } else {
    p.groups = c;
  }
  const int64_t m = p.positions(), step = p.sweep();
  if (m == 0 || p.groups == 0)
    return p;
  int64_t wanted = (kBnTargetItems + p.groups - 1) / p.groups;
  int64_t len = (m + wanted - 1) / wanted;
  len = (len + step - 1) / step * step;
  p.tileLen = len > step * kBnMinSweeps ? len : step * kBnMinSweeps;
  p.tiles = (m + p.tileLen - 1) / p.tileLen;
  return p;
}

/// Where thread t of a block working on `item` reads: its channel (the
/// first of the chunk's in NHWC), and positions first, first + step, ...
/// below end. Inactive threads (NHWC rows beyond rowLanes * lanes) read none.
struct BnThreadWalk {
  bool active = false;
  int64_t tile = 0, channel = 0;
  int64_t first = 0, step = 0, end = 0;
};

GRAPHC_HD BnThreadWalk bnWalk(const BnPlan &p, int64_t item, int t) {
  BnThreadWalk w;
  const int64_t group = item / p.tiles;
  w.tile = item % p.tiles;
  const int64_t start = w.tile * p.tileLen, m = p.positions();
  w.end = start + p.tileLen < m ? start + p.tileLen : m;
  if (p.channelsLast) {
    const int tx = t % p.lanes, ty = t / p.lanes;
    w.active = ty < p.rowLanes;
    w.channel = (group * p.lanes + tx) * p.vec;
    w.first = start + ty;
    w.step = p.rowLanes;
  } else {
    w.active = true;
    w.channel = group;
    w.first = start + (int64_t)t * p.vec;
    w.step = (int64_t)p.rowLanes * p.vec;
  }
  return w;
}

/// The offset of the chunk at `position` of `channel` (NCHW: the chunk's
/// first position; NHWC: its first channel). 32-bit division where the
/// tensor allows it.
GRAPHC_HD int64_t bnOffset(const BnPlan &p, int64_t position, int64_t channel) {
  if (p.channelsLast)
    return position * p.c + channel;
  int64_t n, s;
  if (p.elements() <= INT32_MAX) {
    n = (int64_t)((uint32_t)position / (uint32_t)p.s);
    s = position - n * p.s;
  } else {
    n = position / p.s;
    s = position % p.s;
  }
  return (n * p.c + channel) * p.s + s;
}

/// Element k of a chunk: its channel, and its offset from the chunk's.
GRAPHC_HD int64_t bnChunkChannel(const BnPlan &p, int64_t channel, int k) {
  return p.channelsLast ? channel + k : channel;
}

/// A pair of sums in double.
struct BnSums {
  double p = 0, q = 0;
  GRAPHC_HD void add(const BnSums &o) {
    p += o.p;
    q += o.q;
  }
};

/// One thread's sums of (p, q) per element of its chunks: in float over
/// kBnFlush chunks, then into double.
template <int V> struct BnAccumulator {
  float fp[V], fq[V];
  BnSums sums[V];
  int pending = 0;

  GRAPHC_HD BnAccumulator() {
    for (int k = 0; k < V; ++k)
      fp[k] = fq[k] = 0.0f;
  }
  GRAPHC_HD void add(const float (&p)[V], const float (&q)[V]) {
    for (int k = 0; k < V; ++k) {
      fp[k] += p[k];
      fq[k] += q[k];
    }
    if (++pending == kBnFlush)
      flush();
  }
  GRAPHC_HD void flush() {
    for (int k = 0; k < V; ++k) {
      sums[k].p += (double)fp[k];
      sums[k].q += (double)fq[k];
      fp[k] = fq[k] = 0.0f;
    }
    pending = 0;
  }
  /// NCHW: the chunk's elements are one channel's; their sums in order.
  GRAPHC_HD BnSums combined() const {
    BnSums s;
    for (int k = 0; k < V; ++k)
      s.add(sums[k]);
    return s;
  }
};

/// One thread's pass over its chunks: term(offset, channel, p, q) gives the
/// chunk's (p, q) per element. Returns the flushed accumulator.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable // the device's terms are __device__, the host tests' __host__
#endif
template <int V, typename Term>
GRAPHC_HD BnAccumulator<V> bnAccumulate(const BnPlan &p, const BnThreadWalk &w, const Term &term) {
  BnAccumulator<V> acc;
  if (!w.active)
    return acc;
  float tp[V], tq[V];
  for (int64_t m = w.first; m < w.end; m += w.step) {
    term(bnOffset(p, m, w.channel), w.channel, tp, tq);
    acc.add(tp, tq);
  }
  acc.flush();
  return acc;
}

/// The first level of the fixed tree that adds `count` values: at level h
/// (h, h / 2, ..., 1) value i < h adds value i + h where that exists.
GRAPHC_HD int bnTreeTop(int count) {
  int h = 1;
  while (h < count)
    h <<= 1;
  return h / 2;
}

/// The tree on the host (the device runs each level in parallel, which adds
/// the same pairs): v[0] ends as the sum of v[0..count).
inline void bnTreeSum(BnSums *v, int count) {
  for (int h = bnTreeTop(count); h >= 1; h /= 2)
    for (int i = 0; i < h; ++i)
      if (i + h < count)
        v[i].add(v[i + h]);
}

/// Statistics from a channel's merged sums of d = x - K: the mean and the
/// biased variance (never negative), in double.
GRAPHC_HD void bnStatistics(const BnSums &s, int64_t count, float pivot, float &mean, float &var) {
  const double m = s.p / (double)count;
  const double v = s.q / (double)count - m * m;
  mean = (float)((double)pivot + m);
  var = (float)(v > 0 ? v : 0.0);
}

} // namespace cuda
} // namespace graphc
