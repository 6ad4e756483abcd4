//===- OpShapes.cpp - One shape function per op ----------------------------===//
//
// Each infer<Op> reads operand types and attributes and appends result types.
// The attribute contract of each op is written above its function. Shapes may
// contain the batch symbol N (kBatchDim) until bindBatch; functions that need
// a concrete size on an axis say so in their error. The training ops' shape
// functions are in OpShapesTraining.cpp; what both files share is in
// OpShapeContext.h.
//
//===----------------------------------------------------------------------===//

#include "ir/OpAttrs.h"
#include "ir/OpShapeContext.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <climits>
#include <numeric>

namespace graphc {
namespace shapes {

//===-- Structure ----------------------------------------------------------===//

// Input: its result type is given when it is created.
Result inferInput(const Ctx &c) {
  return one(c.n.result()->type());
}

// Variable: var = module variable name.
Result inferVariable(const Ctx &c) {
  llvm::StringRef name = c.string("var");
  const Variable *v = c.n.graph().module().findVariable(name);
  if (!v)
    return c.fail("reads unknown variable '" + printable(name) + "'");
  return one(v->type);
}

// Constant: value = tensor.
Result inferConstant(const Ctx &c) {
  const Tensor *t = c.attrs().getTensor("value");
  if (!t)
    return c.fail("needs a tensor attribute 'value'");
  return one(t->type());
}

Result inferSameAsFirst(const Ctx &c) {
  return one(c[0]);
}

//===-- Elementwise --------------------------------------------------------===//

Result inferBinary(const Ctx &c) {
  if (auto e = sameDType(c, 0, 1))
    return e;
  auto shape = broadcastShapes(c[0].shape, c[1].shape);
  if (!shape)
    return c.fail("operands " + c.from(0) + " and " + c.from(1) + " do not broadcast");
  return one(TensorType(c[0].dtype, *shape));
}

// Equal, Less, Greater: operands of one dtype, broadcast; the result is bool.
Result inferCompare(const Ctx &c) {
  Result r = inferBinary(c);
  if (r)
    r->front().dtype = DType::Bool;
  return r;
}

// Not: a bool operand.
Result inferNot(const Ctx &c) {
  if (c[0].dtype != DType::Bool)
    return c.fail("operand " + c.from(0) + " is not bool");
  return one(c[0]);
}

// Where: (cond, a, b), cond bool, a and b of one dtype; all three broadcast.
Result inferWhere(const Ctx &c) {
  if (c[0].dtype != DType::Bool)
    return c.fail("condition " + c.from(0) + " is not bool");
  if (auto e = sameDType(c, 1, 2))
    return e;
  auto ab = broadcastShapes(c[1].shape, c[2].shape);
  auto shape = ab ? broadcastShapes(c[0].shape, *ab) : std::nullopt;
  if (!shape)
    return c.fail("operands " + c.from(0) + ", " + c.from(1) + " and " + c.from(2) +
                  " do not broadcast");
  return one(TensorType(c[1].dtype, *shape));
}

// Cast: to = dtype.
Result inferCast(const Ctx &c) {
  return one(TensorType(c.attrs().getDType("to"), c[0].shape));
}

llvm::Error checkApproximate(const Ctx &c) {
  llvm::StringRef a = c.string("approximate");
  if (a.empty() || a == "none" || a == "tanh")
    return llvm::Error::success();
  return c.fail("attribute 'approximate' is '" + printable(a) + "', not 'none' or 'tanh'");
}

// Gelu: approximate = none (the erf form, the default) or tanh.
Result inferGelu(const Ctx &c) {
  if (auto e = checkApproximate(c))
    return e;
  return one(c[0]);
}

// Softmax, LogSoftmax: axis (default -1).
Result inferSoftmaxLike(const Ctx &c) {
  int64_t axis = c.axis(c.attrs().getInt("axis", -1), c[0].rank());
  if (axis < 0 || axis >= (int64_t)c[0].rank())
    return c.fail("axis out of range for " + c.from(0));
  return one(c[0]);
}

//===-- Linear algebra and layers ------------------------------------------===//

// MatMul: numpy matmul; leading dimensions broadcast.
Result inferMatMul(const Ctx &c) {
  if (auto e = sameDType(c, 0, 1))
    return e;
  Dims a(c[0].shape), b(c[1].shape);
  if (a.empty() || b.empty())
    return c.fail("operands must not be scalars");
  bool va = a.size() == 1, vb = b.size() == 1;
  if (va)
    a.insert(a.begin(), 1);
  if (vb)
    b.push_back(1);
  if (a.back() != b[b.size() - 2])
    return c.fail("inner dimensions of " + c.from(0) + " and " + c.from(1) + " differ");
  auto batch = broadcastShapes(llvm::ArrayRef<int64_t>(a).drop_back(2),
                               llvm::ArrayRef<int64_t>(b).drop_back(2));
  if (!batch)
    return c.fail("batch dimensions of " + c.from(0) + " and " + c.from(1) + " do not broadcast");
  Dims out(*batch);
  if (!va)
    out.push_back(a[a.size() - 2]);
  if (!vb)
    out.push_back(b.back());
  return one(TensorType(c[0].dtype, out));
}

// Gemm: alpha, beta, transA, transB; C broadcasts to [M, N].
Result inferGemm(const Ctx &c) {
  if (auto e = needRank(c, 0, 2))
    return e;
  if (auto e = needRank(c, 1, 2))
    return e;
  for (unsigned i = 1; i < c.in.size(); ++i)
    if (auto e = sameDType(c, 0, i))
      return e;
  bool ta = c.attrs().getInt("transA"), tb = c.attrs().getInt("transB");
  int64_t m = c[0].shape[ta ? 1 : 0], k = c[0].shape[ta ? 0 : 1];
  int64_t k2 = c[1].shape[tb ? 1 : 0], n = c[1].shape[tb ? 0 : 1];
  if (k != k2)
    return c.fail("inner dimensions of " + c.from(0) + " and " + c.from(1) + " differ");
  TensorType out(c[0].dtype, {m, n});
  if (c.in.size() == 3) {
    auto s = broadcastShapes(c[2].shape, out.shape);
    if (!s || *s != out.shape)
      return c.fail("bias " + c.from(2) + " does not broadcast to " + toString(out));
  }
  return one(out);
}

llvm::Expected<Window> readWindow(const Ctx &c, Ints kernel) {
  Window w;
  w.kernel = std::move(kernel);
  size_t s = w.kernel.size();
  w.strides = c.attrs().getInts("strides", Ints(s, 1));
  w.pads = c.attrs().getInts("pads", Ints(2 * s, 0));
  w.dilations = c.attrs().getInts("dilations", Ints(s, 1));
  w.ceil = c.attrs().getInt("ceil_mode");
  if (w.strides.size() != s || w.pads.size() != 2 * s || w.dilations.size() != s)
    return c.fail("strides, pads or dilations do not match a " + llvm::Twine(s) + "-d window");
  // Below 2^31 each, so window arithmetic on any shape we accept cannot
  // overflow.
  auto fits = [](int64_t v, int64_t lo) { return v >= lo && v <= INT32_MAX; };
  for (size_t i = 0; i < s; ++i)
    if (!fits(w.kernel[i], 1) || !fits(w.strides[i], 1) || !fits(w.dilations[i], 1) ||
        !fits(w.pads[i], 0) || !fits(w.pads[i + s], 0))
      return c.fail("window sizes, strides and dilations must be positive, pads non-negative "
                    "(and each below 2^31)");
  return w;
}

llvm::Expected<Dims> windowOutput(const Ctx &c, llvm::ArrayRef<int64_t> in, int64_t channels,
                                  const Window &w) {
  Dims out{in[0], channels};
  size_t s = w.kernel.size();
  for (size_t i = 0; i < s; ++i) {
    int64_t o = windowOutputSize(in[2 + i], w.kernel[i], w.strides[i], w.pads[i], w.pads[i + s],
                                 w.dilations[i], w.ceil);
    if (o <= 0)
      return c.fail("window of " + shapeToString(w.kernel) + " does not fit input " + c.from(0));
    out.push_back(o);
  }
  return out;
}

// A fused activation (passes/InferenceFusion.h): relu is the one there is.
llvm::Error checkActivation(const Ctx &c, llvm::StringRef op) {
  if (c.attrs().has("activation") && c.attrs().getString("activation") != "relu")
    return c.fail("activation '" + c.attrs().getString("activation") + "' is not one " + op +
                  " fuses (relu)");
  return llvm::Error::success();
}

// Conv: x [N,C,H,W], w [O,C/group,kh,kw], optional b [O]; strides, pads
// [top,left,bottom,right], dilations, group; activation (fused relu); sum
// (fused residual add: the last operand, of the output's type, is added
// before the activation).
Result inferConv(const Ctx &c) {
  if (auto e = needRank(c, 0, 4))
    return e;
  if (auto e = needRank(c, 1, 4))
    return e;
  if (auto e = sameOrF32(c, 0, 1))
    return e;
  int64_t group = c.attrs().getInt("group", 1);
  // group is compared with the channels before it multiplies anything.
  if (group <= 0 || group > c[0].shape[1] || c[0].shape[1] != c[1].shape[1] * group ||
      c[1].shape[0] % group)
    return c.fail("input channels of " + c.from(0) + " do not match weight " + c.from(1) +
                  " with group " + llvm::Twine(group));
  const bool sum = c.attrs().getInt("sum", 0) != 0;
  const size_t operands = c.in.size() - (sum ? 1 : 0); // x, w and the bias if there is one
  if (operands < 2 || operands > 3)
    return c.fail(sum ? "a Conv with sum takes x, w, an optional bias and the addend"
                      : "a Conv takes x, w and an optional bias");
  if (operands == 3 && (c[2].rank() != 1 || c[2].shape[0] != c[1].shape[0]))
    return c.fail("bias " + c.from(2) + " must be [" + llvm::Twine(c[1].shape[0]) + "]");
  if (operands == 3)
    if (auto e = sameOrF32(c, 0, 2))
      return e;
  if (auto e = checkActivation(c, "a Conv"))
    return e;
  auto w = readWindow(c, Ints(c[1].shape.begin() + 2, c[1].shape.end()));
  if (!w)
    return w.takeError();
  auto out = windowOutput(c, c[0].shape, c[1].shape[0], *w);
  if (!out)
    return out.takeError();
  TensorType y(c[0].dtype, *out);
  if (sum && *c.in.back() != y)
    return c.fail("addend " + c.from(c.in.size() - 1) + " must be " + toString(y));
  return one(y);
}

// MaxPool, AveragePool: kernel_shape, strides, pads, ceil_mode, (AveragePool)
// count_include_pad.
Result inferPool(const Ctx &c) {
  if (auto e = needRank(c, 0, 4))
    return e;
  auto w = readWindow(c, c.attrs().getInts("kernel_shape"));
  if (!w)
    return w.takeError();
  if (w->kernel.size() != 2)
    return c.fail("needs a 2-d kernel_shape");
  auto out = windowOutput(c, c[0].shape, c[0].shape[1], *w);
  if (!out)
    return out.takeError();
  return one(TensorType(c[0].dtype, *out));
}

Result inferGlobalAveragePool(const Ctx &c) {
  if (c[0].rank() < 3)
    return c.fail("input " + c.from(0) + " must have spatial dimensions");
  Dims out(c[0].shape);
  for (size_t i = 2; i < out.size(); ++i)
    out[i] = 1;
  return one(TensorType(c[0].dtype, out));
}

llvm::Error checkChannelVectors(const Ctx &c, unsigned first, unsigned last) {
  if (c[0].rank() < 2)
    return c.fail("input " + c.from(0) + " needs a channel dimension");
  for (unsigned i = first; i <= last; ++i) {
    if (c[i].rank() != 1 || c[i].shape[0] != c[0].shape[1])
      return c.fail("operand " + c.from(i) + " must be [" + llvm::Twine(c[0].shape[1]) + "]");
    if (auto e = sameOrF32(c, 0, i))
      return e;
  }
  // epsilon keeps the variance away from zero; momentum weighs the old
  // running statistics.
  if (auto e = inRange(c, "epsilon", 1e-5, 0, INFINITY))
    return e;
  return inRange(c, "momentum", 0.9, 0, 1);
}

// BatchNorm (inference): x, scale, bias, mean, var; epsilon.
Result inferBatchNorm(const Ctx &c) {
  if (auto e = checkChannelVectors(c, 1, 4))
    return e;
  if (auto e = checkActivation(c, "a BatchNorm"))
    return e;
  return one(c[0]);
}

llvm::Error checkNormalizedShape(const Ctx &c, unsigned first, unsigned last) {
  size_t rank = c[0].rank();
  int64_t axis = c.axis(c.attrs().getInt("axis", -1), rank);
  // Axis 0 is the batch: statistics over it would mix the samples that
  // data-parallel towers split.
  if (axis < 1 || axis >= (int64_t)rank)
    return c.fail("axis " + llvm::Twine(c.attrs().getInt("axis", -1)) + " of input " + c.from(0) +
                  " must name an axis after the batch axis 0");
  llvm::ArrayRef<int64_t> normalized = llvm::ArrayRef<int64_t>(c[0].shape).drop_front(axis);
  if (llvm::is_contained(normalized, kBatchDim))
    return c.fail("input " + c.from(0) + " has the batch among the normalised axes");
  for (unsigned i = first; i <= last; ++i) {
    if (llvm::ArrayRef<int64_t>(c[i].shape) != normalized)
      return c.fail("operand " + c.from(i) + " must be " + shapeToString(normalized) +
                    ", the shape normalised over");
    if (auto e = sameOrF32(c, 0, i))
      return e;
  }
  return inRange(c, "epsilon", 1e-5, 0, INFINITY);
}

// LayerNorm: x, scale[, bias]; axis (default -1), epsilon (default 1e-5).
// Each sample is normalised over the axes from `axis` on; scale and bias have
// their shape.
Result inferLayerNorm(const Ctx &c) {
  if (auto e = checkNormalizedShape(c, 1, c.in.size() - 1))
    return e;
  return one(c[0]);
}

//===-- Shape and data movement --------------------------------------------===//

int64_t knownProduct(llvm::ArrayRef<int64_t> dims, bool &hasBatch) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d == kBatchDim)
      hasBatch = true;
    else
      p *= d;
  }
  return p;
}

// Reshape: shape (fully resolved; N allowed).
Result inferReshape(const Ctx &c) {
  Ints shape = c.attrs().getInts("shape");
  if (auto e = checkTensorSize(TensorType(c[0].dtype, shape), "shape"))
    return c.fail(llvm::toString(std::move(e)));
  bool inBatch = false, outBatch = false;
  int64_t a = knownProduct(c[0].shape, inBatch), b = knownProduct(shape, outBatch);
  for (int64_t d : shape)
    if (d < 0 && d != kBatchDim)
      return c.fail("shape " + shapeToString(shape) + " must be resolved");
  if (inBatch != outBatch || a != b)
    return c.fail("cannot reshape " + c.from(0) + " to " + shapeToString(shape));
  return one(TensorType(c[0].dtype, shape));
}

// Flatten: axis (default 1).
Result inferFlatten(const Ctx &c) {
  int64_t axis = c.axis(c.attrs().getInt("axis", 1), c[0].rank());
  if (axis < 0 || axis > (int64_t)c[0].rank())
    return c.fail("axis out of range for " + c.from(0));
  llvm::ArrayRef<int64_t> dims(c[0].shape);
  bool headBatch = false, tailBatch = false;
  int64_t head = knownProduct(dims.take_front(axis), headBatch);
  int64_t tail = knownProduct(dims.drop_front(axis), tailBatch);
  if (tailBatch || (headBatch && head != 1))
    return c.fail("cannot flatten " + c.from(0) + " while the batch is symbolic");
  return one(TensorType(c[0].dtype, {headBatch ? kBatchDim : head, tail}));
}

// Transpose: perm (default: reversed).
Result inferTranspose(const Ctx &c) {
  size_t r = c[0].rank();
  Ints perm = c.attrs().getInts("perm");
  if (perm.empty())
    for (size_t i = 0; i < r; ++i)
      perm.push_back(r - 1 - i);
  Ints sorted = perm;
  llvm::sort(sorted);
  Ints iota(r);
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota)
    return c.fail("perm " + shapeToString(perm) + " is not a permutation of " + c.from(0));
  Dims out;
  for (int64_t p : perm)
    out.push_back(c[0].shape[p]);
  return one(TensorType(c[0].dtype, out));
}

// Concat, ConcatBatch (axis 0): axis.
Result inferConcat(const Ctx &c) {
  int64_t axis = c.n.op() == Op::ConcatBatch ? 0 : c.axis(c.attrs().getInt("axis"), c[0].rank());
  if (axis < 0 || axis >= (int64_t)c[0].rank())
    return c.fail("axis out of range for " + c.from(0));
  Dims out(c[0].shape);
  for (unsigned i = 1; i < c.in.size(); ++i) {
    if (c[i].rank() != c[0].rank() || c[i].dtype != c[0].dtype)
      return c.fail("operand " + c.from(i) + " does not match " + c.from(0));
    for (size_t d = 0; d < out.size(); ++d) {
      if ((int64_t)d == axis)
        continue;
      if (c[i].shape[d] != out[d])
        return c.fail("operand " + c.from(i) + " does not match " + c.from(0) + " off the axis");
    }
    if (out[axis] == kBatchDim || c[i].shape[axis] == kBatchDim)
      return c.fail("cannot concatenate along the symbolic batch dimension");
    out[axis] += c[i].shape[axis];
  }
  return one(TensorType(c[0].dtype, out));
}

// Split: axis, split (sizes). SplitBatch: sizes (axis 0).
Result inferSplit(const Ctx &c) {
  bool batch = c.n.op() == Op::SplitBatch;
  int64_t axis = batch ? 0 : c.axis(c.attrs().getInt("axis"), c[0].rank());
  Ints sizes = c.attrs().getInts(batch ? "sizes" : "split");
  if (axis < 0 || axis >= (int64_t)c[0].rank())
    return c.fail("axis out of range for " + c.from(0));
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return c.fail("split sizes must be non-negative");
    if (llvm::AddOverflow(total, s, total))
      return c.fail("split sizes " + shapeToString(sizes) + " overflow");
  }
  if (sizes.empty() || c[0].shape[axis] != total)
    return c.fail("split sizes " + shapeToString(sizes) + " do not add up to axis " +
                  llvm::Twine(axis) + " of " + c.from(0));
  Types out;
  for (int64_t s : sizes) {
    TensorType t = c[0];
    t.shape[axis] = s;
    out.push_back(t);
  }
  return out;
}

// Slice: starts, ends, axes (default 0..), steps (default 1); resolved ints.
Result inferSlice(const Ctx &c) {
  Ints starts = c.attrs().getInts("starts"), ends = c.attrs().getInts("ends");
  Ints axes = c.attrs().getInts("axes"), steps = c.attrs().getInts("steps");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return c.fail("starts, ends, axes and steps must have the same length");
  Dims out(c[0].shape);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = c.axis(axes[i], out.size());
    if (a < 0 || a >= (int64_t)out.size() || steps[i] == 0)
      return c.fail("bad axis or zero step");
    if (out[a] == kBatchDim) {
      if (starts[i] == 0 && ends[i] >= INT_MAX && steps[i] == 1)
        continue;
      return c.fail("cannot slice the symbolic batch dimension");
    }
    out[a] = resolveSlice(out[a], starts[i], ends[i], steps[i]).size;
  }
  return one(TensorType(c[0].dtype, out));
}

// Pad: pads [begin..., end...] (2 * rank), mode constant|reflect|edge, value.
Result inferPad(const Ctx &c) {
  Ints pads = c.attrs().getInts("pads");
  size_t r = c[0].rank();
  std::string mode = c.attrs().getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return c.fail("mode '" + printable(mode) + "' is not constant, reflect or edge");
  if (pads.size() != 2 * r)
    return c.fail("pads must have " + llvm::Twine(2 * r) + " entries");
  Dims out(c[0].shape);
  for (size_t i = 0; i < r; ++i) {
    if (pads[i] == 0 && pads[i + r] == 0)
      continue;
    if (out[i] == kBatchDim)
      return c.fail("cannot pad the symbolic batch dimension");
    if (llvm::AddOverflow(out[i], pads[i], out[i]) ||
        llvm::AddOverflow(out[i], pads[i + r], out[i]))
      return c.fail("pads " + shapeToString(pads) + " overflow");
    if (out[i] < 0)
      return c.fail("pads remove more than " + c.from(0) + " has");
  }
  return one(TensorType(c[0].dtype, out));
}

// Squeeze: axes (default: every dimension of size 1).
Result inferSqueeze(const Ctx &c) {
  Ints axes = c.attrs().getInts("axes");
  size_t r = c[0].rank();
  llvm::SmallVector<bool, 6> drop(r, false);
  if (axes.empty())
    for (size_t i = 0; i < r; ++i)
      drop[i] = c[0].shape[i] == 1;
  for (int64_t a : axes) {
    a = c.axis(a, r);
    if (a < 0 || a >= (int64_t)r || c[0].shape[a] != 1)
      return c.fail("cannot squeeze axis " + llvm::Twine(a) + " of " + c.from(0));
    drop[a] = true;
  }
  Dims out;
  for (size_t i = 0; i < r; ++i)
    if (!drop[i])
      out.push_back(c[0].shape[i]);
  return one(TensorType(c[0].dtype, out));
}

// Unsqueeze: axes (positions in the output).
Result inferUnsqueeze(const Ctx &c) {
  Ints axes = c.attrs().getInts("axes");
  size_t r = c[0].rank() + axes.size();
  llvm::SmallVector<bool, 6> inserted(r, false);
  for (int64_t a : axes) {
    a = c.axis(a, r);
    if (a < 0 || a >= (int64_t)r || inserted[a])
      return c.fail("bad unsqueeze axes " + shapeToString(axes));
    inserted[a] = true;
  }
  Dims out;
  size_t j = 0;
  for (size_t i = 0; i < r; ++i)
    out.push_back(inserted[i] ? 1 : c[0].shape[j++]);
  return one(TensorType(c[0].dtype, out));
}

// Expand: shape (numpy broadcast of the input to it).
Result inferExpand(const Ctx &c) {
  Ints shape = c.attrs().getInts("shape");
  auto out = broadcastShapes(c[0].shape, shape);
  if (!out)
    return c.fail("cannot expand " + c.from(0) + " to " + shapeToString(shape));
  return one(TensorType(c[0].dtype, *out));
}

// Gather: axis; indices i64 or i32.
Result inferGather(const Ctx &c) {
  int64_t axis = c.axis(c.attrs().getInt("axis"), c[0].rank());
  if (axis < 0 || axis >= (int64_t)c[0].rank())
    return c.fail("axis out of range for " + c.from(0));
  if (c[1].dtype != DType::I64 && c[1].dtype != DType::I32)
    return c.fail("indices " + c.from(1) + " must be i64 or i32");
  Dims out(c[0].shape.begin(), c[0].shape.begin() + axis);
  out.append(c[1].shape.begin(), c[1].shape.end());
  out.append(c[0].shape.begin() + axis + 1, c[0].shape.end());
  return one(TensorType(c[0].dtype, out));
}

// ReduceMean, ReduceSum: axes (empty: all), keepdims (default 1).
Result inferReduce(const Ctx &c) {
  size_t r = c[0].rank();
  Ints axes = c.attrs().getInts("axes");
  bool keep = c.attrs().getInt("keepdims", 1);
  llvm::SmallVector<bool, 6> reduced(r, axes.empty());
  for (int64_t a : axes) {
    a = c.axis(a, r);
    if (a < 0 || a >= (int64_t)r)
      return c.fail("axis out of range for " + c.from(0));
    reduced[a] = true;
  }
  Dims out;
  for (size_t i = 0; i < r; ++i) {
    if (!reduced[i])
      out.push_back(c[0].shape[i]);
    else if (keep)
      out.push_back(1);
  }
  return one(TensorType(c[0].dtype, out));
}

#define inferIdentity inferSameAsFirst
#define inferAdd inferBinary
#define inferSub inferBinary
#define inferMul inferBinary
#define inferDiv inferBinary
#define inferEqual inferCompare
#define inferLess inferCompare
#define inferGreater inferCompare
#define inferRelu inferSameAsFirst
#define inferLeakyRelu inferSameAsFirst
#define inferSigmoid inferSameAsFirst
#define inferTanh inferSameAsFirst
#define inferExp inferSameAsFirst
#define inferLog inferSameAsFirst
#define inferSqrt inferSameAsFirst
#define inferNeg inferSameAsFirst
#define inferClip inferSameAsFirst
#define inferErf inferSameAsFirst
#define inferHardSigmoid inferSameAsFirst
#define inferHardSwish inferSameAsFirst
#define inferSoftmax inferSoftmaxLike
#define inferLogSoftmax inferSoftmaxLike
#define inferMaxPool inferPool
#define inferAveragePool inferPool
#define inferReluGrad inferActivationGrad
#define inferLeakyReluGrad inferActivationGrad
#define inferSigmoidGrad inferActivationGrad
#define inferTanhGrad inferActivationGrad
#define inferSoftmaxGrad inferActivationGrad
#define inferLogSoftmaxGrad inferActivationGrad
#define inferClipGrad inferActivationGrad
#define inferErfGrad inferActivationGrad
#define inferHardSigmoidGrad inferActivationGrad
#define inferHardSwishGrad inferActivationGrad
#define inferReduceMean inferReduce
#define inferReduceSum inferReduce
#define inferAssign inferUpdate
#define inferApplySGD inferUpdate
#define inferApplyMomentum inferUpdate
#define inferApplyRMSProp inferUpdate
#define inferApplyAdam inferUpdate
#define inferSplitBatch inferSplit
#define inferConcatBatch inferConcat
#define inferTransfer inferSameAsFirst
#define inferAddN inferAllSame
#define inferAllReduce inferAllSame

} // namespace shapes

llvm::Expected<llvm::SmallVector<TensorType, 2>> inferResultTypes(const Node &n) {
  const OpInfo &info = opInfo(n.op());
  int count = n.numOperands();
  if (count < info.minInputs || (info.maxInputs >= 0 && count > info.maxInputs))
    return nodeError(n, "takes " + llvm::Twine(info.minInputs) +
                            (info.maxInputs == info.minInputs ? ""
                             : info.maxInputs < 0             ? " or more"
                                                  : " to " + llvm::Twine(info.maxInputs)) +
                            " operands, has " + llvm::Twine(count));
  // Shape functions read attributes: they get the kinds OpAttrs.def gives.
  if (auto e = checkOpAttributes(n.op(), n.attrs(),
                                 [&](const llvm::Twine &msg) { return nodeError(n, msg); }))
    return e;
  shapes::Ctx c{n, {}};
  for (Value *v : n.operands())
    c.in.push_back(&v->type());
  auto types = [&]() -> shapes::Result {
    switch (n.op()) {
#define GRAPHC_OP(Name, MinIn, MaxIn, NumOut, Traits)                                              \
  case Op::Name:                                                                                   \
    return shapes::infer##Name(c);
#include "ir/Ops.def"
    }
    llvm_unreachable("unknown op");
  }();
  // Attributes can ask for any shape (Reshape, Expand, Pad, gradients' shapes).
  if (types)
    for (const TensorType &t : *types)
      if (auto e = checkTensorSize(t, "its result"))
        return nodeError(n, llvm::toString(std::move(e)));
  return types;
}

std::optional<Dims> broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x == y || y == 1)
      out[i] = x;
    else if (x == 1)
      out[i] = y;
    else
      return std::nullopt;
  }
  return out;
}

int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                         int64_t padEnd, int64_t dilation, bool ceilMode) {
  if (in == kBatchDim)
    return kBatchDim;
  int64_t span = in + padBegin + padEnd - dilation * (kernel - 1) - 1;
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  // A window that would start in the end padding is dropped (PyTorch, ONNX).
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

SliceRange resolveSlice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  auto clampIndex = [&](int64_t i, int64_t lo, int64_t hi) {
    if (i < 0)
      i += dim;
    return std::clamp(i, lo, hi);
  };
  // Sizes are ceil(distance / |step|), written as (distance - 1) / |step| + 1
  // in unsigned arithmetic so that no step, however large, overflows.
  SliceRange r{0, 0, step, 0};
  if (step > 0) {
    r.start = clampIndex(start, 0, dim);
    r.end = clampIndex(end, 0, dim);
    r.size = r.end > r.start ? (int64_t)((uint64_t)(r.end - r.start - 1) / (uint64_t)step) + 1 : 0;
  } else {
    r.start = clampIndex(start, -1, dim - 1);
    r.end = clampIndex(end, -1, dim - 1);
    if (end < -dim)
      r.end = -1;
    uint64_t magnitude = 0 - (uint64_t)step;
    r.size = r.start > r.end ? (int64_t)((uint64_t)(r.start - r.end - 1) / magnitude) + 1 : 0;
  }
  return r;
}

} // namespace graphc
