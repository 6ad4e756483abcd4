//===- OpShapesTraining.cpp - Shape functions of the training ops ---------===//
//
// The training forms and the loss, gradients, variable updates and the
// collectives, as OpShapes.cpp does the rest (same contract: the attributes
// each op reads are written above its function).
//
//===----------------------------------------------------------------------===//

#include "ir/DropoutMask.h"
#include "ir/Modes.h"
#include "ir/OpShapeContext.h"
#include "ir/Shards.h"

#include <climits>

namespace graphc::shapes {

//===-- Training forms and the loss ----------------------------------------===//

// BatchNormTrain: x, scale, bias -> y, batch mean [C], batch variance [C]
// (biased); epsilon.
Result inferBatchNormTrain(const Ctx &c) {
  if (auto e = checkChannelVectors(c, 1, 2))
    return e;
  if (auto e = checkActivation(c, "a BatchNormTrain"))
    return e;
  TensorType stat(c[1].dtype, {c[0].shape[1]});
  return Types{c[0], stat, stat};
}

/// Dropout's `mask` (ir/DropoutMask.h): absent, "sample" or "tensor"; a
/// per-sample mask needs an axis 0.
static llvm::Expected<DropoutMask> checkDropoutMask(const Ctx &c) {
  auto m = parseDropoutMask(c.string("mask"));
  if (!m)
    return c.fail("attribute 'mask' is '" + printable(c.string("mask")) +
                  "', not 'sample' or 'tensor' (absent: one value per element)");
  if (*m == DropoutMask::Sample && c[0].rank() == 0)
    return c.fail("a per-sample mask needs a batch axis, but " + c.from(0) + " is a scalar");
  return *m;
}

// Dropout: ratio, a probability (1 drops everything, as PyTorch's p = 1),
// training, mask.
Result inferDropout(const Ctx &c) {
  if (auto e = inRange(c, "ratio", 0.5, 0, 1))
    return e;
  if (auto m = checkDropoutMask(c); !m)
    return m.takeError();
  return one(c[0]);
}

// DropoutTrain: ratio, seed, mask -> y, mask (the multiplier: 0 or
// 1/(1-ratio); x's shape, or [N,1,...] per sample, [1,...] per tensor).
Result inferDropoutTrain(const Ctx &c) {
  if (auto e = inRange(c, "ratio", 0.5, 0, 1))
    return e;
  auto m = checkDropoutMask(c);
  if (!m)
    return m.takeError();
  return Types{c[0], TensorType(c[0].dtype, dropoutMaskShape(c[0].shape, *m))};
}

/// The loss kind of a SoftmaxCrossEntropy or its gradient: attribute `loss`
/// ("nll", "mse"; absent: softmax cross-entropy).
static llvm::Expected<LossKind> lossKind(const Ctx &c) {
  std::string loss = c.attrs().getString("loss", "cross-entropy");
  auto k = parseLossKind(loss);
  if (!k)
    return c.fail(llvm::toString(k.takeError()));
  return *k;
}

// Cross-entropy and NLL: scores [B,C] and class labels [B] (i64 or i32). MSE:
// an output [B, ...] and targets of its type.
static llvm::Error checkLossOperands(const Ctx &c) {
  auto kind = lossKind(c);
  if (!kind)
    return kind.takeError();
  if (*kind == LossKind::Mse) {
    if (c[0].rank() < 1 || c[1] != c[0])
      return c.fail("targets " + c.from(1) + " must have the type of the output " + c.from(0));
    return llvm::Error::success();
  }
  if (auto e = needRank(c, 0, 2))
    return e;
  if (c[1].rank() != 1 || c[1].shape[0] != c[0].shape[0])
    return c.fail("labels " + c.from(1) + " must be [" + llvm::Twine(c[0].shape[0]) + "]");
  if (c[1].dtype != DType::I64 && c[1].dtype != DType::I32)
    return c.fail("labels " + c.from(1) + " must be i64 or i32");
  return llvm::Error::success();
}

// SoftmaxCrossEntropy: the loss op (attribute `loss`: softmax cross-entropy,
// nll or mse) -> scalar; scale (the sum of per-row or per-element losses is
// multiplied by it; absent: 1/B, the mean over rows, or 1/(elements) for mse).
Result inferSoftmaxCrossEntropy(const Ctx &c) {
  if (auto e = checkLossOperands(c))
    return e;
  return one(TensorType(c[0].dtype, {}));
}

//===-- Gradients ----------------------------------------------------------===//

/// A shape attribute: dimensions non-negative or the batch symbol N.
static llvm::Expected<Dims> shapeAttr(const Ctx &c, llvm::StringRef name, size_t rank = 0) {
  Ints s = c.attrs().getInts(name);
  for (int64_t d : s)
    if (d < 0 && d != kBatchDim)
      return c.fail("attribute '" + name + "' " + shapeToString(s) + " has a negative dimension");
  if (rank && s.size() != rank)
    return c.fail("attribute '" + name + "' " + shapeToString(s) + " must have rank " +
                  llvm::Twine(rank));
  return Dims(s.begin(), s.end());
}

/// A window gradient undoes a forward Conv or pool: the gradient `dy` (operand
/// dyIndex) must have the shape the forward op gives for `input` and, for a
/// Conv, `filter` under the node's attributes (kernels trust that).
static llvm::Error checkForwardWindow(const Ctx &c, llvm::ArrayRef<int64_t> input,
                               llvm::ArrayRef<int64_t> filter, unsigned dyIndex) {
  bool conv = !filter.empty();
  Ints kernel = conv ? Ints(filter.begin() + 2, filter.end()) : c.attrs().getInts("kernel_shape");
  if (kernel.size() != 2)
    return c.fail("needs a 2-d window");
  int64_t channels = conv ? filter[0] : input[1];
  if (conv) {
    int64_t group = c.attrs().getInt("group", 1);
    if (group > input[1] || input[1] != filter[1] * group || filter[0] % group)
      return c.fail("input " + shapeToString(input) + " and filter " + shapeToString(filter) +
                    " do not fit group " + llvm::Twine(group));
  }
  auto w = readWindow(c, std::move(kernel));
  if (!w)
    return w.takeError();
  auto out = windowOutput(c, input, channels, *w);
  if (!out)
    return out.takeError();
  if (c[dyIndex].shape != *out)
    return c.fail("gradient " + c.from(dyIndex) + " does not have the shape " +
                  shapeToString(*out) + " the forward op gives for input " + shapeToString(input));
  return llvm::Error::success();
}

// ConvGradData: dy, w; conv attributes plus input_shape.
Result inferConvGradData(const Ctx &c) {
  auto s = shapeAttr(c, "input_shape", 4);
  if (!s)
    return s.takeError();
  if (auto e = needRank(c, 1, 4))
    return e;
  if (auto e = sameOrF32(c, 0, 1))
    return e;
  if (auto e = checkForwardWindow(c, *s, c[1].shape, 0))
    return e;
  return one(TensorType(c[0].dtype, *s));
}

// ConvGradFilter: x, dy; conv attributes plus filter_shape; to: the
// gradient's dtype when the weights are f32 and x is 16-bit (default: x's).
Result inferConvGradFilter(const Ctx &c) {
  auto s = shapeAttr(c, "filter_shape", 4);
  if (!s)
    return s.takeError();
  if (auto e = needRank(c, 0, 4))
    return e;
  if (auto e = sameDType(c, 0, 1))
    return e;
  if (llvm::is_contained(*s, kBatchDim))
    return c.fail("filter_shape " + shapeToString(*s) + " cannot hold the batch symbol");
  if (auto e = checkForwardWindow(c, c[0].shape, *s, 1))
    return e;
  DType to = c.attrs().has("to") ? c.attrs().getDType("to") : c[0].dtype;
  if (to != c[0].dtype &&
      !(to == DType::F32 && (c[0].dtype == DType::BF16 || c[0].dtype == DType::F16)))
    return c.fail(llvm::Twine("to ") + dtypeName(to) + ": the gradient is " +
                  dtypeName(c[0].dtype) + " or, for 16-bit data, f32");
  return one(TensorType(to, *s));
}

// AveragePoolGrad: dy; pool attributes plus input_shape.
Result inferAveragePoolGrad(const Ctx &c) {
  auto s = shapeAttr(c, "input_shape", 4);
  if (!s)
    return s.takeError();
  if (auto e = checkForwardWindow(c, *s, {}, 0))
    return e;
  return one(TensorType(c[0].dtype, *s));
}

// GatherGrad: indices, dy; axis, data_shape. dy has the shape Gather gives
// for data_shape and the indices.
Result inferGatherGrad(const Ctx &c) {
  auto s = shapeAttr(c, "data_shape");
  if (!s)
    return s.takeError();
  int64_t axis = c.axis(c.attrs().getInt("axis"), s->size());
  if (axis < 0 || axis >= (int64_t)s->size())
    return c.fail("axis out of range for data_shape " + shapeToString(*s));
  if (c[0].dtype != DType::I64 && c[0].dtype != DType::I32)
    return c.fail("indices " + c.from(0) + " must be i64 or i32");
  Dims gathered(s->begin(), s->begin() + axis);
  gathered.append(c[0].shape.begin(), c[0].shape.end());
  gathered.append(s->begin() + axis + 1, s->end());
  if (c[1].shape != gathered)
    return c.fail("gradient " + c.from(1) + " does not have the shape " + shapeToString(gathered) +
                  " Gather gives for data_shape " + shapeToString(*s));
  return one(TensorType(c[1].dtype, *s));
}

// MaxPoolGrad: x, dy; the MaxPool's attributes -> dx with x's type (dy has
// the pooled shape).
Result inferMaxPoolGrad(const Ctx &c) {
  auto pooled = inferPool(c);
  if (!pooled)
    return pooled.takeError();
  if ((*pooled)[0] != c[1])
    return c.fail("gradient " + c.from(1) + " must match the pooled shape " +
                  toString((*pooled)[0]));
  return one(c[0]);
}

// BatchNormTrainGrad: x, scale, mean, var, dy -> dx, dscale, dbias; epsilon.
// With activation = "relu" (passes/FuseBatchNormRelu.h) a sixth operand y,
// the fused forward's output, masks dy first (ReluGrad(y, dy)); y comes
// exactly when the activation does.
Result inferBatchNormTrainGrad(const Ctx &c) {
  if (auto e = checkChannelVectors(c, 1, 3))
    return e;
  if (c[4] != c[0])
    return c.fail("gradient " + c.from(4) + " must match input " + c.from(0));
  if (auto e = checkActivation(c, "a BatchNormTrainGrad"))
    return e;
  const bool relu = c.attrs().has("activation");
  if (relu != (c.in.size() == 6))
    return c.fail(relu ? "with activation relu takes the ReLU's output y as a sixth operand"
                       : "takes a sixth operand (the ReLU's output) only with activation relu");
  if (relu && c[5] != c[0])
    return c.fail("ReLU output " + c.from(5) + " must match input " + c.from(0));
  return Types{c[0], c[1], c[1]};
}

// LayerNormGrad: x, scale, dy -> dx, dscale, dbias; LayerNorm's axis and
// epsilon.
Result inferLayerNormGrad(const Ctx &c) {
  if (auto e = checkNormalizedShape(c, 1, 1))
    return e;
  if (c[2] != c[0])
    return c.fail("gradient " + c.from(2) + " must match input " + c.from(0));
  return Types{c[0], c[1], c[1]};
}

// GeluGrad: x, dy; Gelu's approximate.
Result inferGeluGrad(const Ctx &c) {
  if (auto e = checkApproximate(c))
    return e;
  return inferActivationGrad(c);
}

// <Act>Grad: (y or x), dy -> dx with dy's type.
Result inferActivationGrad(const Ctx &c) {
  if (c[0] != c[1])
    return c.fail("operands " + c.from(0) + " and " + c.from(1) + " must have the same type");
  return one(c[1]);
}

// SoftmaxCrossEntropyGrad: logits, labels, dloss (scalar) -> dlogits; scale.
Result inferSoftmaxCrossEntropyGrad(const Ctx &c) {
  if (auto e = checkLossOperands(c))
    return e;
  if (c[2].numElements() != 1)
    return c.fail("loss gradient " + c.from(2) + " must be a scalar");
  return one(c[0]);
}

//===-- Variable updates ---------------------------------------------------===//

// Assign: var; the value's type must equal the variable's.
// Apply*: var, slots (optimizer state variables), hyper-parameters; operands
// grad and lr (a scalar).
Result inferUpdate(const Ctx &c) {
  llvm::StringRef name = c.string("var");
  const Module &m = c.n.graph().module();
  const Variable *v = m.findVariable(name);
  if (!v)
    return c.fail("writes unknown variable '" + printable(name) + "'");
  // A sharded update (rank, nranks) reads rank's piece of the gradient and
  // keeps only that piece of its slots (Module.h: Variable::sharded).
  const bool sharded = c.attrs().has("nranks");
  if (sharded) {
    int64_t rank = c.attrs().getInt("rank", 0), nranks = c.attrs().getInt("nranks");
    if (rank >= nranks)
      return c.fail("rank " + llvm::Twine(rank) + " is not below nranks " + llvm::Twine(nranks));
    TensorType piece(v->type.dtype, {shardRange(v->type.numElements(), rank, nranks).size()});
    if (c[0] != piece)
      return c.fail("value " + c.from(0) + " is not piece " + llvm::Twine(rank) + " of " +
                    llvm::Twine(nranks) + " of variable '" + printable(name) + "' (" +
                    toString(piece) + ")");
  } else if (c.attrs().has("rank")) {
    return c.fail("has a rank but no nranks");
  } else if (v->type != c[0]) {
    return c.fail("value " + c.from(0) + " does not match variable '" + printable(name) + "' (" +
                  toString(v->type) + ")");
  }
  llvm::ArrayRef<std::string> slots = c.strings("slots");
  size_t wanted = c.n.op() == Op::ApplyMomentum                               ? 1
                  : c.n.op() == Op::ApplyRMSProp || c.n.op() == Op::ApplyAdam ? 2
                                                                              : 0;
  if (slots.size() != wanted)
    return c.fail("needs " + llvm::Twine(wanted) + " optimizer slot" + (wanted == 1 ? "" : "s") +
                  " in 'slots', has " + llvm::Twine(slots.size()));
  for (const std::string &slot : slots) {
    const Variable *s = m.findVariable(slot);
    if (!s || s->type.shape != v->type.shape)
      return c.fail("optimizer slot '" + printable(slot) + "' is missing or mis-shaped");
    if (s->sharded != sharded)
      return c.fail("optimizer slot '" + printable(slot) + "' is " +
                    (s->sharded ? "sharded, the update is not" : "not sharded, the update is"));
  }
  if (c.in.size() >= 2 && c[1].numElements() != 1)
    return c.fail("learning rate " + c.from(1) + " must be a scalar");
  if (c.in.size() == 3 && c[2] != TensorType(DType::F32, {3}))
    return c.fail("loss-scale decision " + c.from(2) + " must be f32[3] (LossScaleStep's result)");
  // Rates that would divide by zero (Adam's bias correction 1 - beta^t) or
  // take a root of a negative number.
  if (auto e = inRange(c, "beta1", 0.9, 0, 1, /*openHigh=*/true))
    return e;
  if (auto e = inRange(c, "beta2", 0.999, 0, 1, /*openHigh=*/true))
    return e;
  if (auto e = inRange(c, "decay", 0.9, 0, 1))
    return e;
  if (auto e = inRange(c, "epsilon", 1e-8, 0, INFINITY))
    return e;
  return Types{};
}

// LossScaleStep: var (the scale), slots [good steps, skipped steps], all
// f32 scalars; growth_interval >= 1. Reads CheckFinite's mark; f32[3].
Result inferLossScaleStep(const Ctx &c) {
  const Module &m = c.n.graph().module();
  std::vector<std::string> vars{c.string("var").str()};
  llvm::ArrayRef<std::string> slots = c.strings("slots");
  if (slots.size() != 2)
    return c.fail("needs 2 slots (good steps, skipped steps), has " + llvm::Twine(slots.size()));
  vars.insert(vars.end(), slots.begin(), slots.end());
  for (const std::string &name : vars) {
    const Variable *v = m.findVariable(name);
    if (!v || v->type != TensorType(DType::F32, {}))
      return c.fail("variable '" + printable(name) + "' is missing or not an f32 scalar");
  }
  if (c.attrs().getInt("growth_interval", 2000) < 1)
    return c.fail("growth_interval must be at least 1");
  if (c[0] != TensorType(DType::F32, {}))
    return c.fail("check " + c.from(0) + " must be an f32 scalar (CheckFinite's result)");
  return one(TensorType(DType::F32, {3}));
}

// CheckFinite: float operands of any shapes; an f32 scalar.
Result inferCheckFinite(const Ctx &c) {
  for (unsigned i = 0; i < c.in.size(); ++i)
    if (!isFloat(c[i].dtype))
      return c.fail("operand " + c.from(i) + " is not a float tensor");
  return one(TensorType(DType::F32, {}));
}

//===-- Several devices ----------------------------------------------------===//

// AddN: operands of one type.
// AllReduce: rank, nranks, group, reduction (sum); results mirror operands.
Result inferAllSame(const Ctx &c) {
  if (c.n.op() == Op::AllReduce) {
    int64_t rank = c.attrs().getInt("rank"), nranks = c.attrs().getInt("nranks");
    if (rank >= nranks)
      return c.fail("rank " + llvm::Twine(rank) + " is not below nranks " + llvm::Twine(nranks));
    if (c.attrs().getString("reduction", "sum") != "sum")
      return c.fail("reduction '" + printable(c.attrs().getString("reduction")) +
                    "' is not one graphc has (sum)");
  }
  for (unsigned i = 1; i < c.in.size(); ++i)
    if (c[i] != c[0] && c.n.op() == Op::AddN)
      return c.fail("operand " + c.from(i) + " does not match " + c.from(0));
  if (c.n.op() == Op::AddN)
    return one(c[0]);
  Types out;
  for (const TensorType *t : c.in)
    out.push_back(*t);
  return out;
}

// ReduceScatter: group, rank < nranks; f32 operands; result i is rank's piece
// of operand i, flattened (ir/Shards.h).
Result inferReduceScatter(const Ctx &c) {
  int64_t rank = c.attrs().getInt("rank"), nranks = c.attrs().getInt("nranks");
  if (rank >= nranks)
    return c.fail("rank " + llvm::Twine(rank) + " is not below nranks " + llvm::Twine(nranks));
  Types out;
  for (unsigned i = 0; i < c.in.size(); ++i) {
    if (c[i].dtype != DType::F32 || !c[i].isStatic())
      return c.fail("operand " + c.from(i) + " is not an f32 tensor of a static shape");
    out.push_back(TensorType(DType::F32, {shardRange(c[i].numElements(), rank, nranks).size()}));
  }
  return out;
}

// AllGather: group, rank < nranks, var (an f32 variable); no result.
Result inferAllGather(const Ctx &c) {
  int64_t rank = c.attrs().getInt("rank"), nranks = c.attrs().getInt("nranks");
  if (rank >= nranks)
    return c.fail("rank " + llvm::Twine(rank) + " is not below nranks " + llvm::Twine(nranks));
  const Variable *v = c.n.graph().module().findVariable(c.string("var"));
  if (!v || v->type.dtype != DType::F32)
    return c.fail("writes variable '" + printable(c.string("var")) +
                  "', which is missing or not f32");
  return Types{};
}

} // namespace graphc::shapes
