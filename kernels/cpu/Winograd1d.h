//===- Winograd1d.h - Convolutions by a 1-D Winograd transform --*- C++ -*-===//
//
// Winograd's minimal filtering F(4, K) along one axis of a convolution whose
// window is K wide along it (K = 3, 5, 7), stride 1, no dilation, one group,
// f32 in the channel-blocked layout: each output line is cut into tiles of 4
// outputs, each tile's K + 3 inputs are transformed (BT), multiplied channel
// against channel with the transformed weights (G), one product per point,
// and transformed back (AT). F(4, 7) does 10 multiplications for 4 outputs
// where the direct convolution does 28; F(4, 3) 6 for 12.
//
// A window that is also F lines high (3x3, 5x5) is F one-line transforms:
// the tile's F input lines are transformed separately and the products sum
// over them as over the channels (a GEMM F times deeper), so a 3x3 does 18
// multiplications for 4 outputs where direct does 36, a 5x5 40 for 100. The
// 1xK and Kx1 windows (inception_v3's 1x7 and 7x1, 29% of its step) are the
// case F = 1, along the width or the height.
//
// The products of a block of tiles are register-blocked GEMMs over the
// channels, the transforms fused around them so the transformed tiles stay
// in cache (per thread: the block's inputs and products).
//
//  - forward: y = x * w (+ bias), any padding below the window's size;
//  - data gradient: dx = dy * w', the same computation with the window
//    flipped, the channels' roles swapped and the padding mirrored;
//  - filter gradient: dw = G^T [sum over tiles of (BT x) (A dy)^T], each
//    thread summing its tiles' products into its own accumulator, summed at
//    the end (a fixed order: the same bits for the same thread count).
//
// Points: F(4, 7) at 0, +-1, +-2, +-1/2, +-3/4 and infinity (the set with
// the smallest error among those tried: within 4e-5 of the mean magnitude of
// a 192-channel output in f32, direct 2e-6); F(4, 3) and F(4, 5) at the
// first 5 and 7 of them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cpu/Winograd1dIsa.h"

#include <cstddef>
#include <optional>

namespace graphc {
namespace wino1d {

/// F(4, r) for r = 3, 5 or 7; null for another r.
const Tables *tablesFor(int r);

/// The vector kernels for channel block `block` on this CPU (16: AVX-512, 8:
/// AVX2 with FMA), or null when this CPU has none for it.
const IsaKernels *kernelsFor(int block);

/// One such convolution, as the forward pass sees it.
struct Shape {
  int64_t batch = 0, cin = 0, cout = 0;
  int64_t height = 0, width = 0;       ///< the input's
  int64_t outHeight = 0, outWidth = 0; ///< the output's
  int taps = 0;                        ///< K, along the transform's axis
  int fold = 1;                        ///< the window's size across it
  bool alongW = true;    ///< the axis: the width (kw = K) or the height (kh = K, kw = 1)
  int64_t pad = 0;       ///< zero positions before the first, along the axis
  int64_t padAcross = 0; ///< zero lines before the first, across it
  int block = 0;         ///< channels per block of the layout
};

/// The shape of a [N,C,H,W] x [O,C,kh,kw] convolution with these strides,
/// dilations, pads ({begin h, begin w, end h, end w}) and group, when this
/// module computes it in channel blocks of `block` (and has the vector code
/// for them here); none otherwise.
std::optional<Shape> shapeOf(const int64_t x[4], const int64_t w[4], const int64_t strides[2],
                             const int64_t dilations[2], const int64_t pads[4], int64_t group,
                             int block);

enum class Pass { Forward, Data, Filter };

/// A convolution's three computations; the tensors are channel-blocked
/// (nChw<block>c), the weights and their gradient plain [O, C, kh, kw].
class Plan {
public:
  Plan(const Shape &s, int threads);

  /// Scratch bytes a pass takes.
  size_t scratchBytes(Pass p) const;
  /// Floats of the forward pass's transformed weights U.
  int64_t weightFloats() const;
  /// U from w (weightFloats() floats), staged through `scratch` (the
  /// forward's): what forward() computes first, for a caller that keeps U
  /// while the weights do not change (inference).
  void transformWeights(const float *w, float *U, void *scratch) const;
  /// y = x * w (+ bias, may be null), then `post` (PostOp bits: kAddTo adds
  /// what y held, kRelu clamps at 0); with `U` from transformWeights, w is
  /// not read.
  void forward(const float *x, const float *w, const float *bias, float *y, void *scratch,
               int post = 0, const float *U = nullptr) const;
  /// dx from dy and w.
  void backwardData(const float *dy, const float *w, float *dx, void *scratch) const;
  /// dw from x and dy.
  void backwardFilter(const float *x, const float *dy, float *dw, void *scratch) const;

  const Shape &shape() const { return shape_; }
  const Tables &tables() const { return *tables_; }
  const IsaKernels &kernels() const { return *isa_; }

private:
  /// One correlation (the forward pass's, or the data gradient's): channels
  /// in and out, the walks of its input and output, its padding, its jobs.
  struct Correlation {
    int64_t cin = 0, cout = 0;
    Walk in, out;
    int64_t pad = 0, padAcross = 0;
    int64_t perLine = 0;     ///< tiles per output line
    int64_t linesPerJob = 1; ///< output lines (of the whole batch) per job
    int64_t jobs = 0;
  };
  Correlation correlation(Pass p) const;
  /// The walk of a [N, channels, h, w] tensor along the axis.
  Walk walk(int64_t channels, int64_t h, int64_t w) const;
  Job job(int64_t index, const Correlation &c) const;
  /// The correlation `c`, U the transformed weights [alpha][fold * cin][cout]
  /// (in panels, panel_, for a wide plan),
  /// `post` the output transform's PostOp bits.
  void correlate(const Correlation &c, const float *in, float *out, const float *U,
                 const float *bias, float *buffers, int post) const;

  /// The wide schedule's phases: the transforms split by lines, the
  /// products by output columns (or rows of dU), one job of every tile.
  void correlateWide(const Correlation &c, const float *in, float *out, const float *U,
                     const float *bias, float *buffers, int post) const;
  /// U from w, `buffers` the scratch after the forward's weights.
  void transformWeightsWith(const float *w, float *U, float *buffers) const;
  /// Stores `row`, row d of point k of transformed weights `depth` rows deep
  /// and `cols` wide, into U: whole rows, or in the wide schedule's panels.
  void storeRow(float *U, int k, int64_t d, int64_t depth, int64_t cols, const float *row) const;

  Shape shape_;
  const Tables *tables_;
  const IsaKernels *isa_;
  int threads_;
  /// Large transformed weights: one job of all tiles, so that they stream
  /// once per run instead of once per job (and one filter accumulator).
  bool wide_ = false;
  /// Wide plans keep transformed weights in panels of this many columns, each
  /// [depth][panel] (U[k][q][d][panel]), so that a thread's products read
  /// them in order instead of a row's slice every few KB, which the
  /// hardware's prefetchers do not follow across pages; 0: rows of all
  /// columns (U[k][d][cols]).
  int64_t panel_ = 0;
  int64_t maxTiles_ = 0; ///< the most tiles a job of any pass has
};

} // namespace wino1d
} // namespace graphc
