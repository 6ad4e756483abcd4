//===- ConvGeometry.h - A convolution node's shapes and window ---*- C++ -*-===//
//
// Conv, ConvGradData and ConvGradFilter carry their window as attributes
// (strides, pads, dilations, group) and their three shapes as operands and
// result; every backend reads and checks them here, once (the gradient ops'
// shapes are not checked by shape inference). ceil_mode, which the pooling
// window reader accepts, may add one output window: the end padding widens so
// that a floor-rounding library computes it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace graphc {

struct ConvGeometry {
  Dims x, w, y; ///< [N,C,H,W], [O,C/g,kh,kw], [N,O,OH,OW]
  int64_t group = 1;
  int64_t strides[2] = {1, 1}, dilations[2] = {1, 1};
  int64_t padBegin[2] = {0, 0}, padEnd[2] = {0, 0}; ///< padEnd widened for ceil_mode
};

/// Conv (x, w[, b]) -> y, ConvGradData (dy, w) -> dx, ConvGradFilter
/// (x, dy) -> dw; an error names the node when the shapes and window disagree.
llvm::Expected<ConvGeometry> convGeometry(const Node &n);

/// Whether a Conv has a bias operand (operand 2): its operands are x, w, the
/// optional bias and, with attribute sum (a fused residual add, inference
/// only), the addend last.
inline bool convHasBias(const Node &n) {
  return n.numOperands() - (n.attrs().getInt("sum", 0) ? 1 : 0) == 3;
}

} // namespace graphc
