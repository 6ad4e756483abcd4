//===- LayoutDevice.h - NCHW <-> NHWC copies: index math and launcher -*- C++ -*-===//
//
// The layout copy between Layout::Plain and Layout::ChannelsLast of a 4-D
// tensor [n, c, h, w] is a batch of matrix transposes: per image, NCHW's
// [c][h*w] becomes NHWC's [h*w][c] and back. The kernel moves 32x32 tiles
// through shared memory, so that both its reads and its writes are
// contiguous runs; it may convert the element type on the way (f16 data
// widened to f32 for a kernel that computes in f32, f32 weights narrowed
// for a bf16 convolution), so a layout change beside a conversion costs no
// pass of its own. The tile and element arithmetic below is what the kernel
// runs; the host tests walk it over every tile and check that each element
// lands where channelsLastOffset says, once.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"
#include "kernels/cuda/ElementwiseDevice.h"

#include <cuda_runtime_api.h>

namespace graphc {
namespace cuda {

/// Element (n, c, h, w) of a [n, c, h, w] tensor stored channels-last.
GRAPHC_HD int64_t channelsLastOffset(int64_t c_, int64_t h_, int64_t w_, int64_t n, int64_t c,
                                     int64_t h, int64_t w) {
  return ((n * h_ + h) * w_ + w) * c_ + c;
}

/// `batch` row-major matrices [rows][cols], each copied into its transpose
/// [cols][rows] (the same element count per matrix).
struct TransposeShape {
  int64_t batch = 0, rows = 0, cols = 0;
};

/// The copy of [n, c, h, w] into channels-last (`toChannelsLast`) or back.
inline TransposeShape layoutCopyShape(int64_t n, int64_t c, int64_t h, int64_t w,
                                      bool toChannelsLast) {
  TransposeShape s;
  s.batch = n;
  s.rows = toChannelsLast ? c : h * w;
  s.cols = toChannelsLast ? h * w : c;
  return s;
}

inline constexpr int kTransposeTile = 32;
/// Threads per block: kTransposeTile columns by kTransposeRows rows, each
/// thread moving kTransposeTile / kTransposeRows elements of a tile.
inline constexpr int kTransposeRows = 8;

GRAPHC_HD int64_t tilesAlong(int64_t n) {
  return (n + kTransposeTile - 1) / kTransposeTile;
}

/// Every tile of every matrix.
GRAPHC_HD int64_t transposeTiles(const TransposeShape &s) {
  return s.batch * tilesAlong(s.rows) * tilesAlong(s.cols);
}

/// Tile `t`: its matrix and its first row and column.
struct TransposeTile {
  int64_t matrix, row, col;
};
GRAPHC_HD TransposeTile transposeTileAt(const TransposeShape &s, int64_t t) {
  const int64_t across = tilesAlong(s.cols), perMatrix = tilesAlong(s.rows) * across;
  TransposeTile at;
  at.matrix = t / perMatrix;
  const int64_t within = t - at.matrix * perMatrix;
  at.row = within / across * kTransposeTile;
  at.col = (within - within / across * across) * kTransposeTile;
  return at;
}

/// Where element (row, col) of matrix `m` is read, and where it is written.
GRAPHC_HD int64_t transposeSource(const TransposeShape &s, int64_t m, int64_t row, int64_t col) {
  return (m * s.rows + row) * s.cols + col;
}
GRAPHC_HD int64_t transposeTarget(const TransposeShape &s, int64_t m, int64_t row, int64_t col) {
  return (m * s.cols + col) * s.rows + row;
}

/// Copies `in` (elements of `from`) transposed into `out` (of `to`),
/// converting as Cast does; any pair of element types. `out` and `in` must
/// not overlap.
cudaError_t launchLayoutCopy(ElemType from, ElemType to, const TransposeShape &s, void *out,
                             const void *in, cudaStream_t stream);

} // namespace cuda
} // namespace graphc
