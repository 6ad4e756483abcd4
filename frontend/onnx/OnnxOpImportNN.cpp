//===- OnnxOpImportNN.cpp - Layers: Conv, pools, BatchNorm, Gemm, Dropout ---===//
//
// 2-d Conv and pools with explicit strides, pads ([top, left, bottom, right]
// as ONNX), dilations and ceil_mode; auto_pad is resolved to pads here.
// BatchNormalization becomes our inference-form BatchNorm (x, scale, bias,
// mean, var) with epsilon and momentum (ONNX convention: the weight of the
// old running value); a training-mode node (training_mode = 1 from opset 14,
// extra outputs before) records `training = 1` and its running-statistic
// outputs are dropped: graphc's training pass updates the statistics itself.
// Dropout keeps its ratio (and `training = 1` when its training_mode input is
// true); its mask output is dropped. Gemm keeps alpha, beta, transA, transB.
// LayerNormalization (opset 17) becomes LayerNorm with its axis (made
// non-negative) and epsilon; stash_type is moot (our statistics are summed
// in double); the Mean and InvStdDev outputs are dropped, so a model that
// reads them is refused where it does.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/ImportContext.h"

#include "ir/AttributeText.h"

namespace graphc::onnxfe {
namespace {

llvm::Error emitWith(NodeContext &ctx, Op op, unsigned numOperands, Attrs attrs) {
  llvm::SmallVector<Value *, 5> operands;
  for (unsigned i = 0; i < numOperands; ++i) {
    if (!ctx.hasInput(i))
      continue;
    auto v = ctx.input(i);
    if (!v)
      return v.takeError();
    operands.push_back(*v);
  }
  auto n = ctx.emit(op, operands, std::move(attrs));
  return n ? llvm::Error::success() : n.takeError();
}

/// Strides, pads and dilations of a 2-d window over input `x`, with
/// auto_pad resolved against the input's spatial sizes.
llvm::Error readWindow(NodeContext &ctx, const TensorType &x, const Ints &kernel, Attrs &a,
                       bool dilations) {
  if (x.rank() != 4 || kernel.size() != 2)
    return ctx.fail("only 2-d windows over 4-d NCHW inputs are supported, input is " + toString(x));
  Ints strides = ctx.getInts("strides").value_or(Ints{1, 1});
  Ints dil = ctx.getInts("dilations").value_or(Ints{1, 1});
  Ints pads = ctx.getInts("pads").value_or(Ints{0, 0, 0, 0});
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
    return ctx.fail("strides, dilations and pads must describe a 2-d window");
  std::string autoPad = ctx.getString("auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    pads.assign(4, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int i = 0; i < 2; ++i) {
      int64_t in = x.shape[2 + i];
      int64_t out = (in + strides[i] - 1) / strides[i];
      int64_t total =
          std::max<int64_t>((out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in, 0);
      int64_t small = total / 2, large = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : large;
      pads[i + 2] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad != "NOTSET") {
    return ctx.fail("unknown auto_pad '" + autoPad + "'");
  }
  a.set("strides", strides);
  a.set("pads", pads);
  if (dilations)
    a.set("dilations", dil);
  else if (dil != Ints{1, 1})
    return ctx.fail("dilations are not supported for this op");
  return llvm::Error::success();
}

llvm::Error importConv(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  auto w = ctx.inputType(1);
  if (!w)
    return w.takeError();
  if (w->rank() != 4)
    return ctx.fail("only 2-d convolutions are supported, weight is " + toString(*w));
  Ints kernel(w->shape.begin() + 2, w->shape.end());
  if (auto k = ctx.getInts("kernel_shape"); k && *k != kernel)
    return ctx.fail("kernel_shape " + shapeToString(*k) + " does not match weight " + toString(*w));
  Attrs a;
  if (auto e = readWindow(ctx, *x, kernel, a, true))
    return e;
  a.set("group", ctx.getInt("group", 1));
  return emitWith(ctx, Op::Conv, 3, std::move(a));
}

template <Op O> llvm::Error importPool(NodeContext &ctx) {
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  auto kernel = ctx.getInts("kernel_shape");
  if (!kernel)
    return ctx.fail("needs attribute kernel_shape");
  Attrs a;
  bool isMax = O == Op::MaxPool;
  if (auto e = readWindow(ctx, *x, *kernel, a, isMax))
    return e;
  a.set("kernel_shape", *kernel);
  a.set("ceil_mode", ctx.getInt("ceil_mode", 0));
  if (!isMax)
    a.set("count_include_pad", ctx.getInt("count_include_pad", 0));
  if (isMax)
    ctx.drop(1, "MaxPool indices");
  return emitWith(ctx, O, 1, std::move(a));
}

llvm::Error importBatchNorm(NodeContext &ctx) {
  if (ctx.opset() < 9 && ctx.getInt("spatial", 1) != 1)
    return ctx.fail("per-activation statistics (spatial = 0) are not supported");
  bool training =
      ctx.opset() >= 14 ? ctx.getInt("training_mode", 0) != 0 : ctx.proto().output_size() > 1;
  Attrs a;
  a.set("epsilon", ctx.getFloat("epsilon", 1e-5));
  a.set("momentum", ctx.getFloat("momentum", 0.9));
  if (training)
    a.set("training", (int64_t)1);
  for (int i = 1; i < ctx.proto().output_size(); ++i)
    ctx.drop(i, "batch-norm statistics outputs; graphc's training pass updates the running "
                "statistics itself");
  if (ctx.numInputs() != 5)
    return ctx.fail("needs 5 inputs (x, scale, bias, mean, var)");
  return emitWith(ctx, Op::BatchNorm, 5, std::move(a));
}

llvm::Error importLayerNorm(NodeContext &ctx) {
  if (ctx.opset() < 17)
    return ctx.fail("LayerNormalization is an op of opset 17 and later");
  if (ctx.numInputs() < 2)
    return ctx.fail("needs the inputs X and Scale");
  auto x = ctx.inputType(0);
  if (!x)
    return x.takeError();
  auto axis = normalizeAxis(ctx, ctx.getInt("axis", -1), (int64_t)x->rank());
  if (!axis)
    return axis.takeError();
  Attrs a;
  a.set("axis", *axis);
  a.set("epsilon", ctx.getFloat("epsilon", 1e-5));
  for (int i = 1; i < ctx.proto().output_size(); ++i)
    ctx.drop(i, "LayerNormalization's Mean and InvStdDev outputs, which graphc's LayerNorm keeps "
                "to itself; export the model without reading them");
  return emitWith(ctx, Op::LayerNorm, 3, std::move(a));
}

llvm::Error importGemm(NodeContext &ctx) {
  Attrs a;
  a.set("alpha", ctx.getFloat("alpha", 1.0));
  a.set("beta", ctx.getFloat("beta", 1.0));
  a.set("transA", ctx.getInt("transA", 0));
  a.set("transB", ctx.getInt("transB", 0));
  return emitWith(ctx, Op::Gemm, 3, std::move(a));
}

llvm::Error importMatMul(NodeContext &ctx) {
  return emitWith(ctx, Op::MatMul, 2, {});
}

llvm::Error importGlobalAveragePool(NodeContext &ctx) {
  return emitWith(ctx, Op::GlobalAveragePool, 1, {});
}

llvm::Error importDropout(NodeContext &ctx) {
  double ratio = ctx.getFloat("ratio", 0.5);
  bool training = false;
  if (ctx.opset() >= 12) {
    if (ctx.hasInput(1)) {
      auto r = ctx.constScalar(1, "ratio");
      if (!r)
        return r.takeError();
      ratio = *r;
    }
    if (ctx.hasInput(2)) {
      auto t = ctx.constScalar(2, "training_mode");
      if (!t)
        return t.takeError();
      training = *t != 0;
    }
  }
  if (ratio < 0 || ratio >= 1)
    return ctx.fail("ratio " + formatDouble(ratio) + " is outside [0, 1)");
  Attrs a;
  a.set("ratio", ratio);
  if (training)
    a.set("training", (int64_t)1);
  ctx.drop(1, "the Dropout mask");
  return emitWith(ctx, Op::Dropout, 1, std::move(a));
}

const OpRule kRules[] = {
    {"Conv", importConv},
    {"MaxPool", importPool<Op::MaxPool>},
    {"AveragePool", importPool<Op::AveragePool>},
    {"GlobalAveragePool", importGlobalAveragePool},
    {"BatchNormalization", importBatchNorm},
    {"LayerNormalization", importLayerNorm},
    {"Gemm", importGemm},
    {"MatMul", importMatMul},
    {"Dropout", importDropout, 0b110},
};

} // namespace

llvm::ArrayRef<OpRule> nnRules() {
  return kRules;
}

} // namespace graphc::onnxfe
