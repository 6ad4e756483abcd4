#include "kernels/ConvGeometry.h"

#include "ir/Diagnostics.h"

#include <algorithm>

namespace graphc {

llvm::Expected<ConvGeometry> convGeometry(const Node &n) {
  ConvGeometry g;
  auto shapeOf = [&](const Value *v) { return v->type().shape; };
  switch (n.op()) {
  case Op::ConvGradData:
    g.x = shapeOf(n.result());
    g.w = shapeOf(n.operand(1));
    g.y = shapeOf(n.operand(0));
    break;
  case Op::ConvGradFilter:
    g.x = shapeOf(n.operand(0));
    g.w = shapeOf(n.result());
    g.y = shapeOf(n.operand(1));
    break;
  default:
    g.x = shapeOf(n.operand(0));
    g.w = shapeOf(n.operand(1));
    g.y = shapeOf(n.result());
    break;
  }
  const Attrs &a = n.attrs();
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

} // namespace graphc
