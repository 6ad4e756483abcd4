//===- ShapeGrad.cpp - Rules for shape and data-movement ops ----------------===//
//
//   Reshape, Flatten, Squeeze, Unsqueeze   Reshape(dy) back to the input shape
//   Transpose     Transpose(dy) with the inverse permutation
//   Concat        Split(dy) at the operands' sizes
//   Split         Concat of the results' gradients, zeros (Expand of 0) where
//                 a result got none
//   Slice         Pad(dy) with zeros back to the input (step 1 only)
//   Pad           Slice(dy) (constant mode; negative pads crop, so their
//                 gradient pads back with zeros)
//   Expand        dy summed back to the input shape
//   Gather        GatherGrad(indices, dy) {axis, data_shape}; no gradient to
//                 the indices
//   ReduceSum     Expand(dy) back to the input (after restoring kept axes)
//   ReduceMean    the same, scaled by 1/count first
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/GradRule.h"

#include "ir/ShapeInference.h"

namespace graphc {
namespace {

Ints shapeOf(const Value *v) {
  return Ints(v->type().shape.begin(), v->type().shape.end());
}

int64_t normalizeAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + (int64_t)rank : axis;
}

llvm::Error reshapeBack(GradContext &c) {
  c.setGrad(0, reshapeTo(c.b(), c.dy(), c.x(0)->type().shape));
  return llvm::Error::success();
}

llvm::Error transposeGrad(GradContext &c) {
  size_t r = c.x(0)->type().rank();
  Ints perm = c.attrs().getInts("perm");
  if (perm.empty())
    for (size_t i = 0; i < r; ++i)
      perm.push_back(r - 1 - i);
  Ints inverse(r);
  for (size_t i = 0; i < r; ++i)
    inverse[perm[i]] = i;
  Attrs a;
  a.set("perm", inverse);
  c.setGrad(0, c.create(Op::Transpose, {c.dy()}, std::move(a), "transpose"));
  return llvm::Error::success();
}

llvm::Error concatGrad(GradContext &c) {
  Node &n = c.node();
  int64_t axis = normalizeAxis(c.attrs().getInt("axis"), c.y()->type().rank());
  if (n.numOperands() == 1) {
    c.setGrad(0, c.dy());
    return llvm::Error::success();
  }
  Ints sizes;
  for (Value *v : n.operands())
    sizes.push_back(v->type().shape[axis]);
  Attrs a;
  a.set("axis", axis);
  a.set("split", sizes);
  Node *split = c.b().createNode(Op::Split, {c.dy()}, std::move(a), "split");
  for (unsigned i = 0; i < n.numOperands(); ++i)
    if (c.needs(i))
      c.setGrad(i, split->result(i));
  return llvm::Error::success();
}

Value *zerosLike(Builder &b, const Value *v) {
  Attrs a;
  a.set("shape", shapeOf(v));
  return b.create(Op::Expand, {scalarConstant(b, 0.0, v->type().dtype, "zero")}, std::move(a),
                  "zeros");
}

llvm::Error splitGrad(GradContext &c) {
  Node &n = c.node();
  if (n.numResults() == 1) {
    c.setGrad(0, c.dy());
    return llvm::Error::success();
  }
  llvm::SmallVector<Value *, 4> parts;
  for (unsigned i = 0; i < n.numResults(); ++i)
    parts.push_back(c.dy(i) ? c.dy(i) : zerosLike(c.b(), c.y(i)));
  Attrs a;
  a.set("axis", normalizeAxis(c.attrs().getInt("axis"), c.x(0)->type().rank()));
  c.setGrad(0, c.create(Op::Concat, parts, std::move(a), "concat"));
  return llvm::Error::success();
}

llvm::Error sliceGrad(GradContext &c) {
  const TensorType &xt = c.x(0)->type();
  size_t r = xt.rank();
  Ints starts = c.attrs().getInts("starts"), ends = c.attrs().getInts("ends");
  Ints axes = c.attrs().getInts("axes"), steps = c.attrs().getInts("steps");
  Ints pads(2 * r, 0);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = normalizeAxis(axes.empty() ? (int64_t)i : axes[i], r);
    int64_t step = steps.empty() ? 1 : steps[i];
    int64_t dim = xt.shape[axis];
    if (dim == kBatchDim) // the shape function allows only the full range here
      continue;
    if (step != 1)
      return c.fail("only slices with step 1 are differentiable (axis " + llvm::Twine(axis) +
                    " has step " + llvm::Twine(step) + ")");
    SliceRange s = resolveSlice(dim, starts[i], ends[i], step);
    if (s.size == 0)
      return c.fail("an empty slice along axis " + llvm::Twine(axis) + " is not differentiable");
    pads[axis] = s.start;
    pads[axis + r] = dim - s.start - s.size;
  }
  if (llvm::all_of(pads, [](int64_t p) { return p == 0; })) {
    c.setGrad(0, c.dy());
    return llvm::Error::success();
  }
  Attrs a;
  a.set("pads", pads);
  c.setGrad(0, c.create(Op::Pad, {c.dy()}, std::move(a), "pad"));
  return llvm::Error::success();
}

llvm::Error padGrad(GradContext &c) {
  std::string mode = c.attrs().getString("mode", "constant");
  if (mode != "constant")
    return c.fail("only constant padding is differentiable, mode is '" + mode + "'");
  const TensorType &yt = c.y()->type();
  size_t r = yt.rank();
  Ints pads = c.attrs().getInts("pads");
  Ints starts, ends, axes, back(2 * r, 0);
  for (size_t i = 0; i < r; ++i) {
    int64_t begin = pads[i], end = pads[i + r];
    if (begin > 0 || end > 0) {
      axes.push_back(i);
      starts.push_back(std::max<int64_t>(begin, 0));
      ends.push_back(yt.shape[i] - std::max<int64_t>(end, 0));
    }
    back[i] = std::max<int64_t>(-begin, 0);
    back[i + r] = std::max<int64_t>(-end, 0);
  }
  Value *g = c.dy();
  if (!axes.empty()) {
    Attrs a;
    a.set("starts", starts);
    a.set("ends", ends);
    a.set("axes", axes);
    g = c.create(Op::Slice, {g}, std::move(a), "slice");
  }
  if (llvm::any_of(back, [](int64_t p) { return p != 0; })) {
    Attrs a;
    a.set("pads", back);
    g = c.create(Op::Pad, {g}, std::move(a), "pad");
  }
  c.setGrad(0, g);
  return llvm::Error::success();
}

llvm::Error expandGrad(GradContext &c) {
  c.setGrad(0, reduceToShape(c.b(), c.dy(), c.x(0)->type().shape));
  return llvm::Error::success();
}

llvm::Error gatherGrad(GradContext &c) {
  if (!c.needs(0))
    return llvm::Error::success();
  Attrs a;
  a.set("axis", normalizeAxis(c.attrs().getInt("axis"), c.x(0)->type().rank()));
  a.set("data_shape", shapeOf(c.x(0)));
  c.setGrad(0, c.create(Op::GatherGrad, {c.x(1), c.dy()}, std::move(a), "grad"));
  return llvm::Error::success();
}

/// ReduceSum and ReduceMean: dy spread back over the reduced axes.
llvm::Error reduceGrad(GradContext &c) {
  Builder &b = c.b();
  const TensorType &xt = c.x(0)->type();
  size_t r = xt.rank();
  Ints axes = c.attrs().getInts("axes");
  llvm::SmallVector<bool, 6> reduced(r, axes.empty());
  for (int64_t a : axes)
    reduced[normalizeAxis(a, r)] = true;
  Dims kept(xt.shape);
  int64_t count = 1;
  for (size_t i = 0; i < r; ++i)
    if (reduced[i]) {
      if (kept[i] == kBatchDim)
        return c.fail("reducing over the symbolic batch needs a bound batch");
      count *= kept[i];
      kept[i] = 1;
    }
  Value *g = c.dy();
  if (c.node().op() == Op::ReduceMean)
    g = b.create(Op::Mul, {g, scalarConstant(b, 1.0 / (double)count, g->type().dtype, "inv_count")},
                 {}, "scale");
  g = reshapeTo(b, g, kept);
  if (kept != xt.shape) {
    Attrs a;
    a.set("shape", shapeOf(c.x(0)));
    g = b.create(Op::Expand, {g}, std::move(a), "expand");
  }
  c.setGrad(0, g);
  return llvm::Error::success();
}

} // namespace

void registerShapeGrads(GradRegistry &r) {
  for (Op op : {Op::Reshape, Op::Flatten, Op::Squeeze, Op::Unsqueeze})
    r.add(op, reshapeBack);
  r.add(Op::Transpose, transposeGrad);
  r.add(Op::Concat, concatGrad);
  r.add(Op::Split, splitGrad);
  r.add(Op::Slice, sliceGrad);
  r.add(Op::Pad, padGrad);
  r.add(Op::Expand, expandGrad);
  r.add(Op::Gather, gatherGrad);
  r.add(Op::ReduceSum, reduceGrad);
  r.add(Op::ReduceMean, reduceGrad);
}

} // namespace graphc
