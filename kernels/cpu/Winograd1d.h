//===- Winograd1d.h - 1-D Winograd convolutions (1xK and Kx1) ---*- C++ -*-===//
//
// A convolution whose window is 1 x K or K x 1 (inception_v3's 1x7 and 7x1:
// 29% of its training step), stride 1, no dilation, one group, "same"
// padding along its axis (K - 1)/2 on each side and none across, f32 in the
// channel-blocked layout, computed by Winograd's minimal filtering F(4, K)
// along the axis: each line is cut into tiles of 4 outputs, each tile's
// K + 3 inputs are transformed (BT), multiplied channel against channel
// with the transformed weights (G), one product per point, and transformed
// back (AT). F(4, 7) does 10 multiplications for 4 outputs where the direct
// convolution does 28. The products of a block of tiles are register-blocked
// GEMMs over the channels, the transforms fused around them so the
// transformed tiles stay in cache (per thread: the block's inputs and
// products, a few hundred KB).
//
//  - forward: y = x * w (+ bias);
//  - data gradient: dx = dy * w', the same computation with w' the window
//    flipped and the channels' roles swapped;
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
  int64_t height = 0, width = 0;
  int taps = 0;        ///< K
  bool alongW = true;  ///< 1 x K (along the width) or K x 1
  int block = 0;       ///< channels per block of the layout
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

  /// Scratch bytes a pass takes (64-byte aligned by the caller).
  size_t scratchBytes(Pass p) const;
  /// y = x * w (+ bias, may be null).
  void forward(const float *x, const float *w, const float *bias, float *y, void *scratch) const;
  /// dx from dy and w.
  void backwardData(const float *dy, const float *w, float *dx, void *scratch) const;
  /// dw from x and dy.
  void backwardFilter(const float *x, const float *dy, float *dw, void *scratch) const;

  const Shape &shape() const { return shape_; }
  const Tables &tables() const { return *tables_; }
  const IsaKernels &kernels() const { return *isa_; }

private:
  /// The jobs of one image: blocks of whole lines.
  int64_t jobsPerImage() const { return (lines_ + linesPerJob_ - 1) / linesPerJob_; }
  Job job(int64_t index) const;
  /// The walk of a tensor of `channels` channels along the axis.
  Walk walk(int64_t channels) const;
  /// The forward computation with `cin` channels in and `cout` out, U the
  /// transformed weights [alpha][cin][cout].
  void correlate(const float *in, int64_t cin, float *out, int64_t cout, const float *U,
                 const float *bias, float *buffers) const;

  Shape shape_;
  const Tables *tables_;
  const IsaKernels *isa_;
  int threads_;
  int64_t lines_ = 0, length_ = 0, perLine_ = 0, linesPerJob_ = 1;
};

} // namespace wino1d
} // namespace graphc
