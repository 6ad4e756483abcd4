//===- ShapeFolding.cpp - Values known at import time ----------------------===//
//
// Folds what ONNX computes from constants and shapes, so our graph only keeps
// runtime data: Constant, Shape, Size, ConstantOfShape always; Identity,
// Cast, Gather, Unsqueeze, Squeeze, Reshape, Flatten, Concat, Slice,
// Transpose, Add, Sub, Mul, Div, Neg, the comparisons (Equal, Less,
// LessOrEqual, Greater, GreaterOrEqual), And, Or, Not, Mod and Where when
// every input is known (constants and integer initializers; float
// initializers are weights and stay variables): PyTorch's exports of
// attention compute reshape targets and masks with them. Shape
// of a value whose dimension is the symbolic batch gives an element that
// stands for N, which survives Gather/Unsqueeze/Concat/Slice/Cast and
// multiplication or division by 1, so PyTorch's
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains resolve to a
// Reshape whose shape holds N. Any other arithmetic on N is an error that
// asks for a bound batch.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/ImportContext.h"
#include "frontend/onnx/OnnxTensor.h"

#include "ir/ShapeInference.h"

#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace graphc::onnxfe {
namespace {

constexpr int64_t kMaxFoldedElements = int64_t(1) << 24;

int64_t intAt(const Tensor &t, int64_t i) {
  switch (t.dtype()) {
  case DType::I64:
    return t.data<int64_t>()[i];
  case DType::I32:
    return t.data<int32_t>()[i];
  case DType::Bool:
    return t.data<uint8_t>()[i];
  default:
    return (int64_t)t.at(i);
  }
}

void setInt(Tensor &t, int64_t i, int64_t v) {
  switch (t.dtype()) {
  case DType::I64:
    t.data<int64_t>()[i] = v;
    break;
  case DType::I32:
    t.data<int32_t>()[i] = (int32_t)v;
    break;
  case DType::Bool:
    t.data<uint8_t>()[i] = v != 0;
    break;
  default:
    t.set(i, (double)v);
  }
}

void copyElement(Tensor &dst, int64_t di, const Tensor &src, int64_t si) {
  size_t s = dtypeSize(src.dtype());
  std::memcpy(static_cast<char *>(dst.raw()) + di * s,
              static_cast<const char *>(src.raw()) + si * s, s);
}

int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

Known sameData(const Known &k, llvm::ArrayRef<int64_t> shape) {
  return Known{k.data.reshaped(shape), k.batch};
}

/// A zero-filled result of `type`, refused above kMaxFoldedElements: folded
/// constants feed shapes and small operands, and a huge one comes from a
/// corrupted or unusual model, not something to materialise at import.
llvm::Expected<Tensor> folded(const NodeContext &ctx, const TensorType &type) {
  auto n = checkedElements(type, ctx.describe() + ": result");
  if (!n)
    return n.takeError();
  if (*n > kMaxFoldedElements)
    return ctx.fail("would fold into a constant of " + toString(type) +
                    ", larger than graphc folds at import");
  return Tensor(type);
}

llvm::Error batchArithmetic(const NodeContext &ctx) {
  return ctx.failNeedsBatch("arithmetic on the symbolic batch size has no symbolic form");
}

//===-- Always folded ------------------------------------------------------===//

llvm::Expected<Known> foldConstant(NodeContext &ctx) {
  using A = onnx::AttributeProto;
  for (const auto &a : ctx.proto().attribute()) {
    if (a.name() == "value") {
      std::string what = ctx.describe() + ": attribute 'value'";
      if (!fromOnnxDType(a.t().data_type())) {
        auto values = foreignValues(a.t(), what);
        if (!values)
          return values.takeError();
        Known k;
        k.data = Tensor(TensorType(DType::F32, Dims(a.t().dims().begin(), a.t().dims().end())));
        for (size_t i = 0; i < values->size(); ++i)
          k.data.set(i, (*values)[i]);
        k.foreignType = a.t().data_type();
        k.foreign = std::move(*values);
        return k;
      }
      auto t = fromOnnxTensor(a.t(), what);
      if (!t)
        return t.takeError();
      return Known{*t, {}};
    }
    if (a.name() == "value_float" && a.type() == A::FLOAT)
      return Known{Tensor::scalar(a.f()), {}};
    if (a.name() == "value_floats") {
      std::vector<float> v(a.floats().begin(), a.floats().end());
      return Known{Tensor::fromFloats({(int64_t)v.size()}, v), {}};
    }
    if (a.name() == "value_int") {
      Tensor t(TensorType(DType::I64, {}));
      t.data<int64_t>()[0] = a.i();
      return Known{t, {}};
    }
    if (a.name() == "value_ints") {
      Ints v(a.ints().begin(), a.ints().end());
      return Known{Tensor::fromInts({(int64_t)v.size()}, v), {}};
    }
  }
  return ctx.fail("only tensor, float and integer constants are supported (not strings or "
                  "sparse tensors)");
}

llvm::Expected<Known> foldShape(NodeContext &ctx) {
  auto type = ctx.inputType(0);
  if (!type)
    return type.takeError();
  int64_t r = type->rank();
  auto clampIndex = [&](int64_t i) { return std::clamp(i < 0 ? i + r : i, (int64_t)0, r); };
  int64_t start = clampIndex(ctx.getInt("start", 0)), end = clampIndex(ctx.getInt("end", r));
  Known k;
  k.data = Tensor(TensorType(DType::I64, {std::max<int64_t>(end - start, 0)}));
  for (int64_t i = start; i < end; ++i) {
    bool batch = type->shape[i] == kBatchDim;
    k.data.data<int64_t>()[i - start] = batch ? 0 : type->shape[i];
    k.batch.push_back(batch);
  }
  return k;
}

llvm::Expected<Known> foldSize(NodeContext &ctx) {
  auto type = ctx.inputType(0);
  if (!type)
    return type.takeError();
  if (!type->isStatic())
    return ctx.failNeedsBatch("the element count of " + toString(*type) +
                              " depends on the symbolic batch size");
  Tensor t(TensorType(DType::I64, {}));
  t.data<int64_t>()[0] = type->numElements();
  return Known{t, {}};
}

llvm::Expected<Known> foldConstantOfShape(NodeContext &ctx) {
  auto shape = ctx.constInts(0, "shape");
  if (!shape)
    return shape.takeError();
  Tensor fill = Tensor::fromFloats({1}, {0.0f});
  if (const onnx::AttributeProto *a = ctx.attr("value")) {
    auto t = fromOnnxTensor(a->t(), ctx.describe() + ": attribute 'value'");
    if (!t)
      return t.takeError();
    if (t->numElements() != 1)
      return ctx.fail("attribute 'value' must hold one element");
    fill = *t;
  }
  auto out = folded(ctx, TensorType(fill.dtype(), *shape));
  if (!out)
    return out.takeError();
  for (int64_t i = 0; i < out->numElements(); ++i)
    copyElement(*out, i, fill, 0);
  return Known{*out, {}};
}

//===-- Folded on known inputs ---------------------------------------------===//

/// Cast's `to`, or CastLike's second input's element type.
llvm::Expected<DType> castTarget(NodeContext &ctx) {
  if (ctx.opType() == "CastLike") {
    auto like = ctx.inputType(1);
    if (!like)
      return like.takeError();
    return like->dtype;
  }
  int64_t to = ctx.getInt("to", 0);
  auto dt = fromOnnxDType((int32_t)to);
  if (!dt)
    return ctx.fail("casts to " + onnxDTypeName((int32_t)to) + ", which graphc does not handle");
  return *dt;
}

llvm::Expected<Known> foldCast(NodeContext &ctx, const Known &in) {
  auto dt = castTarget(ctx);
  if (!dt)
    return dt.takeError();
  if (isFloat(*dt) && in.hasBatch())
    return batchArithmetic(ctx);
  Known k;
  k.data = Tensor(TensorType(*dt, in.data.shape()));
  k.batch = isFloat(*dt) ? llvm::SmallVector<bool, 8>() : in.batch;
  for (int64_t i = 0; i < k.data.numElements(); ++i) {
    if (in.foreignType) {
      double v = in.foreign[i];
      isFloat(*dt) ? k.data.set(i, v) : setInt(k.data, i, (int64_t)std::trunc(v));
    } else if (isFloat(*dt) || isFloat(in.data.dtype()))
      k.data.set(i, isFloat(*dt) && isFloat(in.data.dtype()) ? in.data.at(i)
                    : isFloat(*dt)                           ? (double)intAt(in.data, i)
                                                             : std::trunc(in.data.at(i)));
    else
      setInt(k.data, i, intAt(in.data, i));
  }
  return k;
}

llvm::Expected<Known> foldGather(NodeContext &ctx, const Known &data, const Known &idx) {
  int64_t rank = data.data.type().rank();
  if (rank == 0)
    return ctx.fail("cannot gather from a scalar");
  auto axis = normalizeAxis(ctx, ctx.getInt("axis", 0), rank);
  if (!axis)
    return axis.takeError();
  if (isFloat(idx.data.dtype()) || idx.hasBatch())
    return ctx.fail("indices must be known integers");
  llvm::ArrayRef<int64_t> ds = data.data.shape();
  int64_t outer = product(ds.take_front(*axis)), n = ds[*axis];
  int64_t inner = product(ds.drop_front(*axis + 1)), count = idx.data.numElements();
  Dims shape(ds.begin(), ds.begin() + *axis);
  shape.append(idx.data.shape().begin(), idx.data.shape().end());
  shape.append(ds.begin() + *axis + 1, ds.end());
  Known k;
  auto kData = folded(ctx, TensorType(data.data.dtype(), shape));
  if (!kData)
    return kData.takeError();
  k.data = std::move(*kData);
  if (!data.batch.empty())
    k.batch.assign(k.data.numElements(), false);
  for (int64_t j = 0; j < count; ++j) {
    int64_t at = intAt(idx.data, j);
    if (at < -n || at >= n)
      return ctx.fail("index " + llvm::Twine(at) + " is out of range for dimension of size " +
                      llvm::Twine(n));
    if (at < 0)
      at += n;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t dst = (o * count + j) * inner + i, src = (o * n + at) * inner + i;
        copyElement(k.data, dst, data.data, src);
        if (!k.batch.empty())
          k.batch[dst] = data.batch[src];
      }
  }
  return k;
}

llvm::Expected<Known> foldUnsqueeze(NodeContext &ctx, const Known &in) {
  auto axes = ctx.intsFromAttrOrInput("axes", 1);
  if (!axes)
    return axes.takeError();
  if (!*axes)
    return ctx.fail("needs axes");
  int64_t r = in.data.type().rank() + (int64_t)(*axes)->size();
  llvm::SmallVector<bool, 6> inserted(r, false);
  for (int64_t a : **axes) {
    auto n = normalizeAxis(ctx, a, r);
    if (!n)
      return n.takeError();
    if (inserted[*n])
      return ctx.fail("axis " + llvm::Twine(a) + " appears twice");
    inserted[*n] = true;
  }
  Dims shape;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i)
    shape.push_back(inserted[i] ? 1 : in.data.shape()[j++]);
  return sameData(in, shape);
}

llvm::Expected<Known> foldSqueeze(NodeContext &ctx, const Known &in) {
  auto axes = ctx.intsFromAttrOrInput("axes", 1);
  if (!axes)
    return axes.takeError();
  llvm::ArrayRef<int64_t> s = in.data.shape();
  llvm::SmallVector<bool, 6> drop(s.size(), false);
  if (!*axes)
    for (size_t i = 0; i < s.size(); ++i)
      drop[i] = s[i] == 1;
  else
    for (int64_t a : **axes) {
      auto n = normalizeAxis(ctx, a, s.size());
      if (!n)
        return n.takeError();
      if (s[*n] != 1)
        return ctx.fail("cannot squeeze axis " + llvm::Twine(a) + " of size " + llvm::Twine(s[*n]));
      drop[*n] = true;
    }
  Dims shape;
  for (size_t i = 0; i < s.size(); ++i)
    if (!drop[i])
      shape.push_back(s[i]);
  return sameData(in, shape);
}

llvm::Expected<Known> foldReshape(NodeContext &ctx, const Known &in, const Known &shape) {
  auto dims = resolveReshape(ctx, in.data.shape(), shape, ctx.getInt("allowzero", 0));
  if (!dims)
    return dims.takeError();
  if (product(*dims) != in.data.numElements() || llvm::is_contained(*dims, kBatchDim))
    return ctx.fail("cannot reshape " + toString(in.data.type()) + " to " + shapeToString(*dims));
  return sameData(in, *dims);
}

llvm::Expected<Known> foldFlatten(NodeContext &ctx, const Known &in) {
  llvm::ArrayRef<int64_t> s = in.data.shape();
  int64_t axis = ctx.getInt("axis", 1);
  if (axis < 0)
    axis += s.size();
  if (axis < 0 || axis > (int64_t)s.size())
    return ctx.fail("axis out of range");
  return sameData(in, {product(s.take_front(axis)), product(s.drop_front(axis))});
}

llvm::Expected<Known> foldConcat(NodeContext &ctx, llvm::ArrayRef<const Known *> ins) {
  const TensorType &t0 = ins[0]->data.type();
  auto axis = normalizeAxis(ctx, ctx.getInt("axis", 0), t0.rank());
  if (!axis)
    return axis.takeError();
  Dims shape(t0.shape);
  shape[*axis] = 0;
  bool anyBatch = false;
  for (const Known *k : ins) {
    const TensorType &t = k->data.type();
    bool fits = t.dtype == t0.dtype && t.rank() == t0.rank();
    for (size_t d = 0; fits && d < t.rank(); ++d)
      fits = (int64_t)d == *axis || t.shape[d] == t0.shape[d];
    if (!fits)
      return ctx.fail("inputs " + toString(t0) + " and " + toString(t) + " do not concatenate");
    shape[*axis] += t.shape[*axis];
    anyBatch |= !k->batch.empty();
  }
  Known out;
  auto outData = folded(ctx, TensorType(t0.dtype, shape));
  if (!outData)
    return outData.takeError();
  out.data = std::move(*outData);
  if (anyBatch)
    out.batch.assign(out.data.numElements(), false);
  int64_t outer = product(llvm::ArrayRef<int64_t>(t0.shape).take_front(*axis));
  int64_t at = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const Known *k : ins) {
      int64_t chunk = k->data.numElements() / std::max<int64_t>(outer, 1);
      for (int64_t i = 0; i < chunk; ++i, ++at) {
        copyElement(out.data, at, k->data, o * chunk + i);
        if (anyBatch)
          out.batch[at] = k->isBatch(o * chunk + i);
      }
    }
  return out;
}

llvm::Expected<Known> foldSlice(NodeContext &ctx, const Known &in) {
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
  llvm::ArrayRef<int64_t> s = in.data.shape();
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return ctx.fail("starts, ends, axes and steps must have the same length");
  Dims begin(s.size(), 0), step(s.size(), 1), shape(s.begin(), s.end());
  for (size_t i = 0; i < starts.size(); ++i) {
    auto a = normalizeAxis(ctx, axes[i], s.size());
    if (!a)
      return a.takeError();
    if (steps[i] == 0)
      return ctx.fail("slice step must not be 0");
    SliceRange r = resolveSlice(s[*a], starts[i], ends[i], steps[i]);
    begin[*a] = r.start;
    step[*a] = r.step;
    shape[*a] = r.size;
  }
  Known out;
  out.data = Tensor(TensorType(in.data.dtype(), shape));
  if (!in.batch.empty())
    out.batch.assign(out.data.numElements(), false);
  Dims index(s.size(), 0);
  for (int64_t o = 0; o < out.data.numElements(); ++o) {
    int64_t src = 0;
    for (size_t d = 0; d < s.size(); ++d)
      src = src * s[d] + begin[d] + index[d] * step[d];
    copyElement(out.data, o, in.data, src);
    if (!out.batch.empty())
      out.batch[o] = in.batch[src];
    for (int64_t d = (int64_t)s.size() - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  return out;
}

llvm::Expected<Known> foldTranspose(NodeContext &ctx, const Known &in) {
  llvm::ArrayRef<int64_t> s = in.data.shape();
  Ints perm = ctx.getInts("perm").value_or(Ints{});
  if (perm.empty())
    for (int64_t i = (int64_t)s.size() - 1; i >= 0; --i)
      perm.push_back(i);
  Ints sorted = perm;
  llvm::sort(sorted);
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != (int64_t)i || sorted.size() != s.size())
      return ctx.fail("perm " + shapeToString(perm) + " is not a permutation of " +
                      toString(in.data.type()));
  Dims shape, strides(s.size(), 1);
  for (int64_t d = (int64_t)s.size() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * s[d + 1];
  for (int64_t p : perm)
    shape.push_back(s[p]);
  Known out;
  out.data = Tensor(TensorType(in.data.dtype(), shape));
  if (!in.batch.empty())
    out.batch.assign(out.data.numElements(), false);
  Dims index(s.size(), 0);
  for (int64_t o = 0; o < out.data.numElements(); ++o) {
    int64_t src = 0;
    for (size_t d = 0; d < s.size(); ++d)
      src += index[d] * strides[perm[d]];
    copyElement(out.data, o, in.data, src);
    if (!out.batch.empty())
      out.batch[o] = in.batch[src];
    for (int64_t d = (int64_t)s.size() - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  return out;
}

/// Index of element o of a result shaped `out` in an operand shaped `s` that
/// broadcasts to it (numpy rules).
int64_t sourceIndex(int64_t o, llvm::ArrayRef<int64_t> out, llvm::ArrayRef<int64_t> s) {
  int64_t idx = 0, stride = 1, rem = o;
  for (int64_t d = (int64_t)out.size() - 1, e = (int64_t)s.size() - 1; d >= 0; --d, --e) {
    int64_t coord = rem % out[d];
    rem /= out[d];
    if (e >= 0) {
      if (s[e] != 1)
        idx += coord * stride;
      stride *= s[e];
    }
  }
  return idx;
}

/// Add, Sub, Mul, Div (numpy broadcasting) and Neg.
llvm::Expected<Known> foldArithmetic(NodeContext &ctx, llvm::ArrayRef<const Known *> ins) {
  llvm::StringRef op = ctx.opType();
  const Known &a = *ins[0];
  const Known &b = op == "Neg" ? a : *ins[1];
  if (a.data.dtype() != b.data.dtype())
    return ctx.fail("operands " + toString(a.data.type()) + " and " + toString(b.data.type()) +
                    " have different element types");
  auto shape = broadcastShapes(a.data.shape(), b.data.shape());
  if (!shape)
    return ctx.fail("operands " + toString(a.data.type()) + " and " + toString(b.data.type()) +
                    " do not broadcast");
  Known out;
  DType dt = a.data.dtype();
  auto outData = folded(ctx, TensorType(dt, *shape));
  if (!outData)
    return outData.takeError();
  out.data = std::move(*outData);
  bool anyBatch = a.hasBatch() || b.hasBatch();
  if (anyBatch)
    out.batch.assign(out.data.numElements(), false);
  for (int64_t o = 0; o < out.data.numElements(); ++o) {
    int64_t i = sourceIndex(o, *shape, a.data.shape()), j = sourceIndex(o, *shape, b.data.shape());
    if (op == "Neg") {
      if (a.isBatch(i))
        return batchArithmetic(ctx);
      isFloat(dt) ? out.data.set(o, -a.data.at(i)) : setInt(out.data, o, -intAt(a.data, i));
      continue;
    }
    bool ba = a.isBatch(i), bb = b.isBatch(j);
    if (ba || bb) {
      // N * 1, 1 * N, N / 1, N + 0, N - 0 stay N; anything else has no form.
      double other = ba ? (bb ? NAN : b.data.at(j)) : a.data.at(i);
      bool keeps = (op == "Mul" && other == 1) || (op == "Div" && ba && other == 1) ||
                   (op == "Add" && other == 0) || (op == "Sub" && ba && other == 0);
      if (!keeps)
        return batchArithmetic(ctx);
      out.batch[o] = true;
      continue;
    }
    if (isFloat(dt)) {
      double x = a.data.at(i), y = b.data.at(j);
      out.data.set(o, op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y);
    } else {
      int64_t x = intAt(a.data, i), y = intAt(b.data, j);
      if (op == "Div" && y == 0)
        return ctx.fail("integer division by zero");
      setInt(out.data, o, op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y);
    }
  }
  return out;
}

/// Expand of integers: the input and the shape broadcast both ways (numpy
/// rules).
llvm::Expected<Known> foldExpand(NodeContext &ctx, const Known &in, const Known &shape) {
  if (isFloat(shape.data.dtype()) || shape.data.type().rank() != 1)
    return ctx.fail("shape must be a 1-d integer tensor, not " + toString(shape.data.type()));
  Ints target;
  for (int64_t i = 0; i < shape.data.numElements(); ++i)
    target.push_back(intAt(shape.data, i));
  auto dims = broadcastShapes(in.data.shape(), target);
  if (!dims)
    return ctx.fail("input " + toString(in.data.type()) + " does not broadcast with shape " +
                    shapeToString(target));
  auto data = folded(ctx, TensorType(in.data.dtype(), *dims));
  if (!data)
    return data.takeError();
  Known out;
  out.data = std::move(*data);
  if (in.hasBatch())
    out.batch.assign(out.data.numElements(), false);
  for (int64_t o = 0; o < out.data.numElements(); ++o) {
    int64_t i = sourceIndex(o, *dims, in.data.shape());
    copyElement(out.data, o, in.data, i);
    if (in.isBatch(i))
      out.batch[o] = true;
  }
  return out;
}

/// Equal, Less, LessOrEqual, Greater, GreaterOrEqual, And, Or (bool results)
/// and Mod (ONNX's: integers take the divisor's sign unless fmod = 1, floats
/// need fmod = 1), numpy broadcasting. The batch symbol N is unknown until the
/// batch is bound, but at least 1: a comparison of N with a number <= 0 has
/// an answer (PyTorch's expand(-1, ...) asks Equal(shape, -1)); anything else
/// about N is an error asking for a bound batch.
llvm::Expected<Known> foldLogic(NodeContext &ctx, const Known &a, const Known &b) {
  llvm::StringRef op = ctx.opType();
  if (a.data.dtype() != b.data.dtype())
    return ctx.fail("operands " + toString(a.data.type()) + " and " + toString(b.data.type()) +
                    " have different element types");
  DType dt = a.data.dtype();
  bool logical = op == "And" || op == "Or";
  if (logical != (dt == DType::Bool))
    return ctx.fail(logical ? "needs bool operands, not " + toString(a.data.type())
                            : "does not compare or divide bool operands");
  bool fmod = ctx.getInt("fmod", 0) != 0;
  if (op == "Mod" && isFloat(dt) && !fmod)
    return ctx.fail("on floats needs fmod = 1, as ONNX requires");
  auto shape = broadcastShapes(a.data.shape(), b.data.shape());
  if (!shape)
    return ctx.fail("operands " + toString(a.data.type()) + " and " + toString(b.data.type()) +
                    " do not broadcast");
  auto outData = folded(ctx, TensorType(op == "Mod" ? dt : DType::Bool, *shape));
  if (!outData)
    return outData.takeError();
  Known out{std::move(*outData), {}};
  for (int64_t o = 0; o < out.data.numElements(); ++o) {
    int64_t i = sourceIndex(o, *shape, a.data.shape()), j = sourceIndex(o, *shape, b.data.shape());
    bool ba = a.isBatch(i), bb = b.isBatch(j);
    if (ba || bb) {
      // N against a number c <= 0: N > c.
      bool comparison = op != "Mod" && !logical;
      if (!comparison || (ba && bb) || intAt(ba ? b.data : a.data, ba ? j : i) > 0)
        return batchArithmetic(ctx);
      bool greater = op == "Greater" || op == "GreaterOrEqual";
      bool less = op == "Less" || op == "LessOrEqual";
      setInt(out.data, o, ba ? greater : less);
      continue;
    }
    if (op == "Mod") {
      if (isFloat(dt)) {
        out.data.set(o, std::fmod(a.data.at(i), b.data.at(j)));
        continue;
      }
      int64_t x = intAt(a.data, i), y = intAt(b.data, j);
      if (y == 0)
        return ctx.fail("integer division by zero");
      int64_t r = x % y;
      if (!fmod && r != 0 && ((r < 0) != (y < 0)))
        r += y;
      setInt(out.data, o, r);
      continue;
    }
    bool r;
    if (isFloat(dt)) {
      double x = a.data.at(i), y = b.data.at(j);
      r = op == "Equal"         ? x == y
          : op == "Less"        ? x < y
          : op == "LessOrEqual" ? x <= y
          : op == "Greater"     ? x > y
                                : x >= y;
    } else {
      int64_t x = intAt(a.data, i), y = intAt(b.data, j);
      r = op == "And"           ? x && y
          : op == "Or"          ? x || y
          : op == "Equal"       ? x == y
          : op == "Less"        ? x < y
          : op == "LessOrEqual" ? x <= y
          : op == "Greater"     ? x > y
                                : x >= y;
    }
    setInt(out.data, o, r);
  }
  return out;
}

llvm::Expected<Known> foldNot(NodeContext &ctx, const Known &in) {
  if (in.data.dtype() != DType::Bool)
    return ctx.fail("needs a bool operand, not " + toString(in.data.type()));
  Known out{Tensor(in.data.type()), {}};
  for (int64_t i = 0; i < in.data.numElements(); ++i)
    setInt(out.data, i, !intAt(in.data, i));
  return out;
}

/// Where(cond, a, b), numpy broadcasting; a chosen batch symbol stays N.
llvm::Expected<Known> foldWhere(NodeContext &ctx, llvm::ArrayRef<const Known *> ins) {
  const Known &c = *ins[0], &a = *ins[1], &b = *ins[2];
  if (c.data.dtype() != DType::Bool)
    return ctx.fail("condition must be bool, not " + toString(c.data.type()));
  if (a.data.dtype() != b.data.dtype())
    return ctx.fail("operands " + toString(a.data.type()) + " and " + toString(b.data.type()) +
                    " have different element types");
  if (c.hasBatch())
    return batchArithmetic(ctx);
  auto ab = broadcastShapes(a.data.shape(), b.data.shape());
  auto shape = ab ? broadcastShapes(c.data.shape(), *ab) : std::nullopt;
  if (!shape)
    return ctx.fail("condition and operands do not broadcast");
  auto outData = folded(ctx, TensorType(a.data.dtype(), *shape));
  if (!outData)
    return outData.takeError();
  Known out{std::move(*outData), {}};
  if (a.hasBatch() || b.hasBatch())
    out.batch.assign(out.data.numElements(), false);
  for (int64_t o = 0; o < out.data.numElements(); ++o) {
    bool pickA = intAt(c.data, sourceIndex(o, *shape, c.data.shape())) != 0;
    const Known &src = pickA ? a : b;
    int64_t i = sourceIndex(o, *shape, src.data.shape());
    copyElement(out.data, o, src.data, i);
    if (src.isBatch(i))
      out.batch[o] = true;
  }
  return out;
}

bool isLogicOp(llvm::StringRef op) {
  return op == "Equal" || op == "Less" || op == "LessOrEqual" || op == "Greater" ||
         op == "GreaterOrEqual" || op == "And" || op == "Or" || op == "Mod";
}

const llvm::StringSet<> &foldableOps() {
  static const llvm::StringSet<> ops = {
      "Identity", "Cast",    "CastLike",    "Gather",    "Unsqueeze", "Squeeze", "Expand",
      "Reshape",  "Flatten", "Concat",      "Slice",     "Transpose",
      "Add",      "Sub",     "Mul",         "Div",       "Neg",
      "Equal",    "Less",    "LessOrEqual", "Greater",   "GreaterOrEqual",
      "And",      "Or",      "Not",         "Mod",       "Where"};
  return ops;
}

/// `op` on known inputs (`ins`, null for an absent optional input).
llvm::Expected<Known> foldKnown(NodeContext &ctx, llvm::StringRef op,
                                llvm::ArrayRef<const Known *> ins) {
  for (const Known *k : ins)
    if (k && k->foreignType && op != "Cast" && op != "CastLike" && op != "Identity")
      return ctx.fail("an input has element type " + onnxDTypeName(k->foreignType) +
                      ", which graphc does not handle");
  if (op == "Identity")
    return *ins[0];
  if (op == "Cast" || op == "CastLike")
    return foldCast(ctx, *ins[0]);
  if (op == "Unsqueeze")
    return foldUnsqueeze(ctx, *ins[0]);
  if (op == "Squeeze")
    return foldSqueeze(ctx, *ins[0]);
  if (op == "Flatten")
    return foldFlatten(ctx, *ins[0]);
  if (op == "Concat")
    return foldConcat(ctx, ins);
  if (op == "Slice")
    return foldSlice(ctx, *ins[0]);
  if (op == "Transpose")
    return foldTranspose(ctx, *ins[0]);
  if (op == "Neg")
    return foldArithmetic(ctx, ins);
  if (op == "Not")
    return foldNot(ctx, *ins[0]);
  if (ins.size() < 2)
    return ctx.fail("needs two inputs");
  if (op == "Gather")
    return foldGather(ctx, *ins[0], *ins[1]);
  if (op == "Expand")
    return foldExpand(ctx, *ins[0], *ins[1]);
  if (op == "Reshape")
    return foldReshape(ctx, *ins[0], *ins[1]);
  if (isLogicOp(op))
    return foldLogic(ctx, *ins[0], *ins[1]);
  if (op == "Where") {
    if (ins.size() < 3)
      return ctx.fail("needs three inputs");
    return foldWhere(ctx, ins);
  }
  return foldArithmetic(ctx, ins);
}

/// The node's result if it is known at import time, or nullopt.
llvm::Expected<std::optional<Known>> foldNode(NodeContext &ctx) {
  llvm::StringRef op = ctx.opType();
  auto wrap = [](llvm::Expected<Known> k) -> llvm::Expected<std::optional<Known>> {
    if (!k)
      return k.takeError();
    return std::optional<Known>(std::move(*k));
  };
  if (op == "Constant")
    return wrap(foldConstant(ctx));
  if (op == "Shape")
    return wrap(foldShape(ctx));
  if (op == "Size")
    return wrap(foldSize(ctx));
  if (op == "ConstantOfShape")
    return wrap(foldConstantOfShape(ctx));
  if (!foldableOps().contains(op) || ctx.numInputs() == 0)
    return std::nullopt;
  // CastLike reads only its second input's element type, known at import
  // whatever computes the input.
  const unsigned folds = op == "CastLike" ? 1 : ctx.numInputs();
  // Only Slice has optional inputs in the middle; a gap elsewhere is left to
  // the op rule, which reports it.
  llvm::SmallVector<const Known *, 4> ins;
  for (unsigned i = 0; i < folds; ++i) {
    if (!ctx.hasInput(i) && (op != "Slice" || i == 0))
      return std::nullopt;
    const Slot *s = ctx.hasInput(i) ? ctx.importer().slot(ctx.inputName(i)) : nullptr;
    if (ctx.hasInput(i) && (!s || !s->knownAtImport() || !s->foldable))
      return std::nullopt;
    ins.push_back(s ? s->known.get() : nullptr);
  }
  // Expand folds shape arithmetic (integers) only: data, and a shape holding
  // the batch (a batch-sized value), expand at run time.
  if (op == "Expand" && (isFloat(ins[0]->data.dtype()) || ins[1]->hasBatch()))
    return std::nullopt;
  return wrap(foldKnown(ctx, op, ins));
}

} // namespace

bool alwaysFolded(llvm::StringRef op) {
  return op == "Constant" || op == "Shape" || op == "Size" || op == "ConstantOfShape";
}

llvm::Expected<bool> tryFold(NodeContext &ctx) {
  auto result = foldNode(ctx);
  if (!result)
    return result.takeError();
  if (!*result)
    return false;
  ctx.bindKnown(0, std::move(**result));
  return true;
}

llvm::Expected<Dims> resolveReshape(const NodeContext &ctx, llvm::ArrayRef<int64_t> input,
                                    const Known &shape, bool allowZero) {
  if (isFloat(shape.data.dtype()) || shape.data.type().rank() != 1)
    return ctx.fail("shape must be a 1-d integer tensor, not " + toString(shape.data.type()));
  Dims out;
  int inferAt = -1;
  for (int64_t i = 0; i < shape.data.numElements(); ++i) {
    if (shape.isBatch(i)) {
      out.push_back(kBatchDim);
      continue;
    }
    int64_t v = intAt(shape.data, i);
    if (v == -1) {
      if (inferAt >= 0)
        return ctx.fail("shape has more than one -1");
      inferAt = (int)i;
      out.push_back(1);
    } else if (v == 0 && !allowZero) {
      if (i >= (int64_t)input.size())
        return ctx.fail("shape copies dimension " + llvm::Twine(i) + " (0) that the input " +
                        shapeToString(input) + " does not have");
      out.push_back(input[i]);
    } else if (v < 0) {
      return ctx.fail("shape has a negative dimension " + llvm::Twine(v));
    } else {
      out.push_back(v);
    }
  }
  if (inferAt < 0)
    return out;
  bool inBatch = false, outBatch = false;
  int64_t inKnown = 1, outKnown = 1;
  for (int64_t d : input)
    d == kBatchDim ? (void)(inBatch = true) : (void)(inKnown *= d);
  for (int64_t i = 0; i < (int64_t)out.size(); ++i)
    if (i != inferAt)
      out[i] == kBatchDim ? (void)(outBatch = true) : (void)(outKnown *= out[i]);
  if (outKnown == 0 || (inBatch == outBatch && inKnown % outKnown) || (!inBatch && outBatch))
    return ctx.fail("cannot reshape " + shapeToString(input) + " to " +
                    shapeToString(llvm::ArrayRef<int64_t>(out)) + " with -1 at position " +
                    llvm::Twine(inferAt));
  if (inBatch && !outBatch) {
    if (inKnown != outKnown)
      return ctx.failNeedsBatch("-1 in the shape stands for " +
                                llvm::Twine(inKnown / std::max<int64_t>(outKnown, 1)) +
                                " x the batch size, which has no symbolic form");
    out[inferAt] = kBatchDim;
  } else {
    out[inferAt] = inKnown / outKnown;
  }
  return out;
}

} // namespace graphc::onnxfe
