//===- ConvPlan.cpp - Convolution geometry, lowering and algorithm choice -===//

#include "kernels/cuda/ConvPlan.h"

#include "ir/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace graphc {
namespace cuda {

llvm::Expected<ConvGeometry> convGeometry(const Node &n) {
  ConvGeometry g;
  const Attrs &a = n.attrs();
  switch (n.op()) {
  case Op::ConvGradData: {
    Ints shape = a.getInts("input_shape");
    g.x.assign(shape.begin(), shape.end());
    g.w = n.operand(1)->type().shape;
    g.y = n.operand(0)->type().shape;
    break;
  }
  case Op::ConvGradFilter: {
    Ints shape = a.getInts("filter_shape");
    g.x = n.operand(0)->type().shape;
    g.w.assign(shape.begin(), shape.end());
    g.y = n.operand(1)->type().shape;
    break;
  }
  default:
    g.x = n.operand(0)->type().shape;
    g.w = n.operand(1)->type().shape;
    g.y = n.result()->type().shape;
    break;
  }
  Ints strides = a.getInts("strides", {1, 1}), pads = a.getInts("pads", {0, 0, 0, 0});
  Ints dilations = a.getInts("dilations", {1, 1});
  g.group = a.getInt("group", 1);
  if (g.x.size() != 4 || g.w.size() != 4 || g.y.size() != 4)
    return nodeError(n, "needs 4-d input, filter and output, has " + shapeToString(g.x) + ", " +
                            shapeToString(g.w) + ", " + shapeToString(g.y));
  if (strides.size() != 2 || pads.size() != 4 || dilations.size() != 2)
    return nodeError(n, "needs 2 strides, 4 pads and 2 dilations");
  if (g.group <= 0 || g.x[1] != g.w[1] * g.group || g.w[0] % g.group || g.y[1] != g.w[0] ||
      g.y[0] != g.x[0])
    return nodeError(n, "input " + shapeToString(g.x) + ", filter " + shapeToString(g.w) +
                            " and output " + shapeToString(g.y) + " do not fit group " +
                            llvm::Twine(g.group));
  for (int i = 0; i < 2; ++i) {
    if (strides[i] <= 0 || dilations[i] <= 0 || pads[i] < 0 || pads[i + 2] < 0)
      return nodeError(n, "strides and dilations must be positive, pads non-negative");
    int64_t extent = (g.w[2 + i] - 1) * dilations[i] + 1;
    int64_t floorOut = (g.x[2 + i] + pads[i] + pads[i + 2] - extent) / strides[i] + 1;
    // ceil_mode may add one window; the end padding widens so floor agrees.
    int64_t needEnd = (g.y[2 + i] - 1) * strides[i] + extent - g.x[2 + i] - pads[i];
    if (g.y[2 + i] != floorOut && g.y[2 + i] != floorOut + 1)
      return nodeError(n, "output " + shapeToString(g.y) + " does not match input " +
                              shapeToString(g.x) + " under this window");
    g.strides[i] = strides[i];
    g.dilations[i] = dilations[i];
    g.padBegin[i] = pads[i];
    g.padEnd[i] = std::max(pads[i + 2], needEnd);
  }
  return g;
}

ConvLowering lowerConv(const ConvGeometry &g) {
  ConvLowering l;
  l.paddedX = g.x;
  for (int i = 0; i < 2; ++i) {
    l.pad[i] = std::min(g.padBegin[i], g.padEnd[i]);
    l.extraBegin[i] = g.padBegin[i] - l.pad[i];
    l.extraEnd[i] = g.padEnd[i] - l.pad[i];
    l.paddedX[2 + i] += l.extraBegin[i] + l.extraEnd[i];
    l.explicitPad |= l.extraBegin[i] || l.extraEnd[i];
  }
  return l;
}

std::optional<size_t> chooseConvAlgorithm(llvm::ArrayRef<AlgoCandidate> candidates,
                                          size_t workspaceLimit, bool allowTF32) {
  auto usable = [&](const AlgoCandidate &c) {
    return c.ok && c.memory <= workspaceLimit && (allowTF32 || !c.tensorOps);
  };
  for (const AlgoCandidate &c : candidates)
    if (usable(c) && c.deterministic)
      return &c - candidates.data();
  for (const AlgoCandidate &c : candidates)
    if (usable(c))
      return &c - candidates.data();
  return std::nullopt;
}

std::string convCacheKey(const ConvGeometry &g, ConvDirection d, bool allowTF32, int ordinal) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << "dir" << (int)d << " x" << shapeToString(g.x) << " w" << shapeToString(g.w) << " y"
     << shapeToString(g.y) << " g" << g.group;
  for (int i = 0; i < 2; ++i)
    os << " s" << g.strides[i] << " d" << g.dilations[i] << " p" << g.padBegin[i] << ","
       << g.padEnd[i];
  os << (allowTF32 ? " tf32" : " fp32") << " gpu" << ordinal;
  return os.str();
}

} // namespace cuda
} // namespace graphc
