//===- OnnxOpImportShape.cpp - Shapes, data movement, reductions -----------===//
//
// Ops whose shapes, axes or pads ONNX gives as inputs (from opset 10, 11, 13
// or 18 depending on the op) or attributes (before): both forms become our
// attributes, resolved at import time (ImportContext.h): Reshape's shape with
// 0 and -1 resolved (the batch as N), Slice's axes and steps explicit and
// positive-step bounds clamped, Pad's pads for every axis, Split's sizes,
// Squeeze's and Unsqueeze's axes explicit and sorted, reduction axes
// explicit. An input that is computed at run time where a constant is needed
// is an error naming the node.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/ImportContext.h"

#include "ir/ShapeInference.h"

#include "llvm/ADT/STLExtras.h"

#include <climits>

namespace graphc::onnxfe {
namespace {

llvm::Error emitUnary(NodeContext &ctx, Op op, Attrs attrs) {
  auto x = ctx.input(0);
  if (!x)
    return x.takeError();
  auto n = ctx.emit(op, {*x}, std::move(attrs));
  return n ? llvm::Error::success() : n.takeError();
}

llvm::Expected<Ints> normalizeAxes(const NodeContext &ctx, const Ints &axes, int64_t rank) {
  Ints out;
  for (int64_t a : axes) {
    auto n = normalizeAxis(ctx, a, rank);
    if (!n)
      return n.takeError();
    if (llvm::is_contained(out, *n))
      return ctx.fail("axis " + llvm::Twine(a) + " appears twice");
    out.push_back(*n);
  }
  llvm::sort(out);
  return out;
}

llvm::Error importReshape(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  const Known *shape = ctx.known(1);
  if (!shape) {
    auto e = ctx.constInts(1, "shape");
    return e ? ctx.fail("needs a shape") : e.takeError();
  }
  auto dims = resolveReshape(ctx, x->shape, *shape, ctx.getInt("allowzero", 0));
  if (!dims)
    return dims.takeError();
  Attrs a;
  a.set("shape", Ints(dims->begin(), dims->end()));
  return emitUnary(ctx, Op::Reshape, std::move(a));
}

llvm::Error importExpand(NodeContext &ctx) {
  const Known *shape = ctx.known(1);
  if (!shape || isFloat(shape->data.dtype()) || shape->data.type().rank() != 1) {
    auto e = ctx.constInts(1, "shape");
    return e ? ctx.fail("shape must be a 1-d integer tensor") : e.takeError();
  }
  Ints dims;
  for (int64_t i = 0; i < shape->data.numElements(); ++i)
    dims.push_back(shape->isBatch(i) ? kBatchDim : (int64_t)shape->data.at(i));
  Attrs a;
  a.set("shape", dims);
  return emitUnary(ctx, Op::Expand, std::move(a));
}

llvm::Error importFlatten(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  int64_t axis = ctx.getInt("axis", 1), r = x->rank();
  if (axis < 0)
    axis += r;
  if (axis < 0 || axis > r)
    return ctx.fail("axis " + llvm::Twine(ctx.getInt("axis", 1)) + " is out of range for " +
                    toString(*x));
  Attrs a;
  a.set("axis", axis);
  return emitUnary(ctx, Op::Flatten, std::move(a));
}

llvm::Error importTranspose(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  Ints perm;
  if (auto p = ctx.getInts("perm"))
    perm = *p;
  else
    for (int64_t i = x->rank() - 1; i >= 0; --i)
      perm.push_back(i);
  Attrs a;
  a.set("perm", perm);
  return emitUnary(ctx, Op::Transpose, std::move(a));
}

llvm::Error importConcat(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  auto axis = normalizeAxis(ctx, ctx.getInt("axis", 0), x->rank());
  if (!axis)
    return axis.takeError();
  llvm::SmallVector<Value *, 4> operands;
  for (unsigned i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i))
      continue;
    auto v = ctx.input(i);
    if (!v)
      return v.takeError();
    operands.push_back(*v);
  }
  Attrs a;
  a.set("axis", *axis);
  auto n = ctx.emit(Op::Concat, operands, std::move(a));
  return n ? llvm::Error::success() : n.takeError();
}

llvm::Error importSplit(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  auto axis = normalizeAxis(ctx, ctx.getInt("axis", 0), x->rank());
  if (!axis)
    return axis.takeError();
  auto sizes = ctx.intsFromAttrOrInput("split", 1);
  if (!sizes)
    return sizes.takeError();
  Ints split;
  if (*sizes) {
    split = **sizes;
  } else {
    int64_t dim = x->shape[*axis];
    int64_t parts = ctx.getInt("num_outputs", ctx.proto().output_size());
    if (dim == kBatchDim)
      return ctx.failNeedsBatch("the symbolic batch dimension cannot be split");
    if (parts <= 0 || parts != ctx.proto().output_size())
      return ctx.fail("num_outputs " + llvm::Twine(parts) + " does not match its " +
                      llvm::Twine(ctx.proto().output_size()) + " outputs");
    // Opset 18: chunks of ceil(dim / parts), the last one smaller.
    int64_t chunk = (dim + parts - 1) / parts;
    if (!ctx.attr("num_outputs") && dim % parts)
      return ctx.fail("axis " + llvm::Twine(*axis) + " of " + toString(*x) +
                      " does not split evenly into " + llvm::Twine(parts) + " outputs");
    for (int64_t i = 0; i < parts; ++i)
      split.push_back(std::max<int64_t>(std::min(chunk, dim - i * chunk), 0));
  }
  if ((int64_t)split.size() != ctx.proto().output_size())
    return ctx.fail("split " + shapeToString(split) + " does not match its " +
                    llvm::Twine(ctx.proto().output_size()) + " outputs");
  Attrs a;
  a.set("axis", *axis);
  a.set("split", split);
  return emitUnary(ctx, Op::Split, std::move(a));
}

llvm::Error importSlice(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  Ints starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.getInts("starts").value_or(Ints{});
    ends = ctx.getInts("ends").value_or(Ints{});
    axes = ctx.getInts("axes").value_or(Ints{});
  } else {
    const char *names[] = {"starts", "ends", "axes", "steps"};
    Ints *lists[] = {&starts, &ends, &axes, &steps};
    for (unsigned i = 0; i < 4; ++i) {
      if (!ctx.hasInput(i + 1))
        continue;
      auto v = ctx.constInts(i + 1, names[i]);
      if (!v)
        return v.takeError();
      *lists[i] = std::move(*v);
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return ctx.fail("starts, ends, axes and steps must have the same length");
  for (size_t i = 0; i < axes.size(); ++i) {
    auto a = normalizeAxis(ctx, axes[i], x->rank());
    if (!a)
      return a.takeError();
    axes[i] = *a;
    int64_t dim = x->shape[*a];
    // Clamp forward slices of known dimensions; the result reads the same
    // whoever resolves it again. Backward slices keep ONNX's bounds, whose
    // "before the first element" has no index of its own.
    if (steps[i] > 0 && dim != kBatchDim) {
      SliceRange r = resolveSlice(dim, starts[i], ends[i], steps[i]);
      starts[i] = r.start;
      ends[i] = std::max(r.end, r.start);
    } else if (dim == kBatchDim && steps[i] == 1 && starts[i] == 0 && ends[i] >= INT_MAX) {
      ends[i] = INT64_MAX;
    }
  }
  Attrs a;
  a.set("starts", starts);
  a.set("ends", ends);
  a.set("axes", axes);
  a.set("steps", steps);
  return emitUnary(ctx, Op::Slice, std::move(a));
}

llvm::Error importPad(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  int64_t r = x->rank();
  std::string mode = ctx.getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return ctx.fail("pad mode '" + mode + "' is not supported (constant, reflect, edge are)");
  Ints pads;
  double value = 0;
  if (ctx.opset() < 11) {
    pads = ctx.getInts("pads").value_or(Ints{});
    value = ctx.getFloat("value", 0.0);
  } else {
    auto p = ctx.constInts(1, "pads");
    if (!p)
      return p.takeError();
    pads = std::move(*p);
    if (ctx.hasInput(2)) {
      auto v = ctx.constScalar(2, "constant_value");
      if (!v)
        return v.takeError();
      value = *v;
    }
    if (ctx.hasInput(3)) {
      auto axes = ctx.constInts(3, "axes");
      if (!axes)
        return axes.takeError();
      size_t n = axes->size();
      if (pads.size() != 2 * n)
        return ctx.fail("pads " + shapeToString(pads) + " must have two entries per axis of " +
                        shapeToString(*axes));
      Ints full(2 * r, 0);
      for (size_t i = 0; i < n; ++i) {
        auto a = normalizeAxis(ctx, (*axes)[i], r);
        if (!a)
          return a.takeError();
        full[*a] = pads[i];
        full[*a + r] = pads[i + n];
      }
      pads = std::move(full);
    }
  }
  if ((int64_t)pads.size() != 2 * r)
    return ctx.fail("pads " + shapeToString(pads) + " must have " + llvm::Twine(2 * r) +
                    " entries for " + toString(*x));
  Attrs a;
  a.set("mode", mode);
  a.set("pads", pads);
  a.set("value", value);
  return emitUnary(ctx, Op::Pad, std::move(a));
}

llvm::Error importSqueeze(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  auto given = ctx.intsFromAttrOrInput("axes", 1);
  if (!given)
    return given.takeError();
  Ints axes;
  if (*given) {
    auto n = normalizeAxes(ctx, **given, x->rank());
    if (!n)
      return n.takeError();
    axes = std::move(*n);
  } else {
    // Fixed now: the batch symbol is never squeezed, whatever it is bound to.
    for (size_t i = 0; i < x->rank(); ++i)
      if (x->shape[i] == 1)
        axes.push_back(i);
  }
  Attrs a;
  a.set("axes", axes);
  return emitUnary(ctx, Op::Squeeze, std::move(a));
}

llvm::Error importUnsqueeze(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  auto given = ctx.intsFromAttrOrInput("axes", 1);
  if (!given)
    return given.takeError();
  if (!*given)
    return ctx.fail("needs axes");
  auto axes = normalizeAxes(ctx, **given, x->rank() + (*given)->size());
  if (!axes)
    return axes.takeError();
  Attrs a;
  a.set("axes", *axes);
  return emitUnary(ctx, Op::Unsqueeze, std::move(a));
}

llvm::Error importGather(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  auto axis = normalizeAxis(ctx, ctx.getInt("axis", 0), x->rank());
  if (!axis)
    return axis.takeError();
  auto data = ctx.input(0);
  if (!data)
    return data.takeError();
  auto indices = ctx.input(1);
  if (!indices)
    return indices.takeError();
  Attrs a;
  a.set("axis", *axis);
  auto n = ctx.emit(Op::Gather, {*data, *indices}, std::move(a));
  return n ? llvm::Error::success() : n.takeError();
}

template <Op O> llvm::Error importReduce(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  auto given = ctx.intsFromAttrOrInput("axes", 1);
  if (!given)
    return given.takeError();
  bool none = !*given || (*given)->empty();
  if (none && ctx.getInt("noop_with_empty_axes", 0))
    return emitUnary(ctx, Op::Identity, {});
  Ints axes;
  if (none) {
    for (size_t i = 0; i < x->rank(); ++i)
      axes.push_back(i);
  } else {
    auto n = normalizeAxes(ctx, **given, x->rank());
    if (!n)
      return n.takeError();
    axes = std::move(*n);
  }
  Attrs a;
  a.set("axes", axes);
  a.set("keepdims", ctx.getInt("keepdims", 1));
  return emitUnary(ctx, O, std::move(a));
}

const OpRule kRules[] = {
    {"Reshape", importReshape, 0b10},
    {"Expand", importExpand, 0b10},
    {"Flatten", importFlatten},
    {"Transpose", importTranspose},
    {"Concat", importConcat},
    {"Split", importSplit, 0b10},
    {"Slice", importSlice, 0b11110},
    {"Pad", importPad, 0b1110},
    {"Squeeze", importSqueeze, 0b10},
    {"Unsqueeze", importUnsqueeze, 0b10},
    {"Gather", importGather},
    {"ReduceMean", importReduce<Op::ReduceMean>, 0b10},
    {"ReduceSum", importReduce<Op::ReduceSum>, 0b10},
};

} // namespace

llvm::ArrayRef<OpRule> shapeRules() {
  return kRules;
}

} // namespace graphc::onnxfe
