//===- NNGrad.cpp - Rules for layers: matmul, conv, pools, norms, the loss ---===//
//
//   MatMul        dA = dY·Bᵀ, dB = Aᵀ·dY (Gemm with transposes for matrices;
//                 batched MatMul with Transpose otherwise; vectors are lifted to
//                 matrices and broadcast batch axes summed back)
//   Gemm          the same with transA/transB/alpha folded into Gemm attributes;
//                 dC = beta · dY summed to C's shape
//   Conv          ConvGradData(dy, w) {conv attrs, input_shape},
//                 ConvGradFilter(x, dy) {conv attrs, filter_shape[, to = w's
//                 dtype when it is not x's]},
//                 bias: ReduceSum over every axis but channels (of dy cast to
//                 the bias's f32 when dy is 16-bit)
//   MaxPool       MaxPoolGrad(x, dy) {pool attrs}
//   AveragePool   AveragePoolGrad(dy) {pool attrs, input_shape}
//   GlobalAveragePool  AveragePoolGrad(dy) {kernel_shape = spatial size, input_shape}
//   BatchNormTrain     BatchNormTrainGrad(x, scale, mean, var, dy) {epsilon}
//   LayerNorm     LayerNormGrad(x, scale, dy) {axis, epsilon}: dx, dscale, dbias
//   BatchNorm     (inference form, frozen) through its affine form:
//                 y = (x - mean)·scale/sqrt(var + eps) + bias
//   SoftmaxCrossEntropy  SoftmaxCrossEntropyGrad(logits, labels, dloss) {scale}
//
// Batch statistics (BatchNormTrain results 1 and 2) and running statistics
// (BatchNorm operands 3 and 4) are not differentiated: they feed moving
// averages, not the loss; a graph that differentiates through them is refused.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/GradRule.h"

#include "ir/ShapeInference.h"

#include <numeric>

namespace graphc {
namespace {

Value *transposeLast2(Builder &b, Value *v) {
  Ints perm(v->type().rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  Attrs a;
  a.set("perm", perm);
  return b.create(Op::Transpose, {v}, std::move(a), "transpose");
}

Value *gemm(Builder &b, Value *x, Value *y, bool transA, bool transB, double alpha,
            llvm::StringRef leaf) {
  Attrs a;
  if (transA)
    a.set("transA", int64_t(1));
  if (transB)
    a.set("transB", int64_t(1));
  if (alpha != 1.0)
    a.set("alpha", alpha);
  return b.create(Op::Gemm, {x, y}, std::move(a), leaf);
}

llvm::Error matMulGrad(GradContext &c) {
  Builder &b = c.b();
  Dims as(c.x(0)->type().shape), bs(c.x(1)->type().shape);
  Dims a2 = as, b2 = bs;
  if (as.size() == 1)
    a2 = {1, as[0]};
  if (bs.size() == 1)
    b2 = {bs[0], 1};
  auto batch = broadcastShapes(llvm::ArrayRef<int64_t>(a2).drop_back(2),
                               llvm::ArrayRef<int64_t>(b2).drop_back(2));
  if (!batch)
    return c.fail("batch dimensions do not broadcast");
  Dims y2 = *batch;
  y2.push_back(a2[a2.size() - 2]);
  y2.push_back(b2.back());
  Value *A = reshapeTo(b, c.x(0), a2), *B = reshapeTo(b, c.x(1), b2);
  Value *dY = reshapeTo(b, c.dy(), y2);
  bool matrices = a2.size() == 2 && b2.size() == 2;
  if (c.needs(0)) {
    Value *dA = matrices ? gemm(b, dY, B, false, true, 1.0, "grad_a")
                         : b.create(Op::MatMul, {dY, transposeLast2(b, B)}, {}, "grad_a");
    c.setGrad(0, reshapeTo(b, reduceToShape(b, dA, a2), as));
  }
  if (c.needs(1)) {
    Value *dB = matrices ? gemm(b, A, dY, true, false, 1.0, "grad_b")
                         : b.create(Op::MatMul, {transposeLast2(b, A), dY}, {}, "grad_b");
    c.setGrad(1, reshapeTo(b, reduceToShape(b, dB, b2), bs));
  }
  return llvm::Error::success();
}

llvm::Error gemmGrad(GradContext &c) {
  // Y = alpha·op(A)·op(B) + beta·C.
  Builder &b = c.b();
  bool ta = c.attrs().getInt("transA"), tb = c.attrs().getInt("transB");
  double alpha = c.attrs().getFloat("alpha", 1.0), beta = c.attrs().getFloat("beta", 1.0);
  Value *A = c.x(0), *B = c.x(1), *dY = c.dy();
  if (c.needs(0))
    c.setGrad(0, ta ? gemm(b, B, dY, tb, true, alpha, "grad_a")     // alpha·op(B)·dYᵀ
                    : gemm(b, dY, B, false, !tb, alpha, "grad_a")); // alpha·dY·op(B)ᵀ
  if (c.needs(1))
    c.setGrad(1, tb ? gemm(b, dY, A, true, ta, alpha, "grad_b")     // alpha·dYᵀ·op(A)
                    : gemm(b, A, dY, !ta, false, alpha, "grad_b")); // alpha·op(A)ᵀ·dY
  if (c.node().numOperands() == 3 && c.needs(2)) {
    Value *dC = reduceToShape(b, dY, c.x(2)->type().shape);
    if (beta != 1.0)
      dC = b.create(Op::Mul, {dC, scalarConstant(b, beta, dC->type().dtype, "beta")});
    c.setGrad(2, dC);
  }
  return llvm::Error::success();
}

/// ReduceSum of `v` over every axis but the channel axis 1, giving [C].
Value *sumPerChannel(Builder &b, Value *v, llvm::StringRef leaf) {
  Ints axes;
  for (size_t i = 0; i < v->type().rank(); ++i)
    if (i != 1)
      axes.push_back(i);
  Attrs a;
  a.set("axes", axes);
  a.set("keepdims", int64_t(0));
  return b.create(Op::ReduceSum, {v}, std::move(a), leaf);
}

Ints shapeInts(const Value *v) {
  return Ints(v->type().shape.begin(), v->type().shape.end());
}

llvm::Error convGrad(GradContext &c) {
  Builder &b = c.b();
  if (c.needs(0)) {
    Attrs a = c.attrs();
    a.set("input_shape", shapeInts(c.x(0)));
    c.setGrad(0, b.create(Op::ConvGradData, {c.dy(), c.x(1)}, std::move(a), "grad_data"));
  }
  if (c.needs(1)) {
    Attrs a = c.attrs();
    a.set("filter_shape", shapeInts(c.x(1)));
    // f32 weights of 16-bit data (mixed precision) get an f32 gradient.
    if (c.x(1)->type().dtype != c.x(0)->type().dtype)
      a.set("to", c.x(1)->type().dtype);
    c.setGrad(1, b.create(Op::ConvGradFilter, {c.x(0), c.dy()}, std::move(a), "grad_filter"));
  }
  if (c.node().numOperands() == 3 && c.needs(2)) {
    // An f32 bias of 16-bit data (mixed precision) sums an f32 copy of dy.
    Value *dy = c.dy();
    DType bias = c.x(2)->type().dtype;
    if (bias != dy->type().dtype) {
      Attrs to;
      to.set("to", bias);
      dy = b.create(Op::Cast, {dy}, std::move(to), "grad_bias_input");
    }
    c.setGrad(2, sumPerChannel(b, dy, "grad_bias"));
  }
  return llvm::Error::success();
}

llvm::Error maxPoolGrad(GradContext &c) {
  c.setGrad(0, c.create(Op::MaxPoolGrad, {c.x(0), c.dy()}, c.attrs(), "grad"));
  return llvm::Error::success();
}

llvm::Error averagePoolGrad(GradContext &c) {
  Attrs a = c.attrs();
  a.set("input_shape", shapeInts(c.x(0)));
  c.setGrad(0, c.create(Op::AveragePoolGrad, {c.dy()}, std::move(a), "grad"));
  return llvm::Error::success();
}

llvm::Error globalAveragePoolGrad(GradContext &c) {
  const TensorType &t = c.x(0)->type();
  if (t.rank() != 4)
    return c.fail("only 2-d global average pooling is differentiable, input is " + toString(t));
  Attrs a;
  a.set("kernel_shape", Ints{t.shape[2], t.shape[3]});
  a.set("input_shape", shapeInts(c.x(0)));
  c.setGrad(0, c.create(Op::AveragePoolGrad, {c.dy()}, std::move(a), "grad"));
  return llvm::Error::success();
}

llvm::Error batchNormTrainGrad(GradContext &c) {
  if (c.dy(1) || c.dy(2))
    return c.fail("the loss depends on the batch statistics (results 1 and 2), which have no "
                  "gradient rule");
  Attrs a;
  if (const Attribute *eps = c.attrs().find("epsilon"))
    a.set("epsilon", *eps);
  Node *g = c.b().createNode(Op::BatchNormTrainGrad, {c.x(0), c.x(1), c.y(1), c.y(2), c.dy()},
                             std::move(a), "grad");
  for (unsigned i = 0; i < 3; ++i)
    if (c.needs(i))
      c.setGrad(i, g->result(i));
  return llvm::Error::success();
}

llvm::Error batchNormInferenceGrad(GradContext &c) {
  if (c.needs(3) || c.needs(4))
    return c.fail("the running mean and variance (operands 3 and 4) have no gradient rule");
  Builder &b = c.b();
  const TensorType &xt = c.x(0)->type();
  DType dt = xt.dtype;
  int64_t channels = xt.shape[1];
  Dims perChannel(xt.rank(), 1);
  perChannel[1] = channels;
  Value *eps = scalarConstant(b, c.attrs().getFloat("epsilon", 1e-5), dt, "epsilon");
  Value *stddev = b.create(Op::Sqrt, {b.create(Op::Add, {c.x(4), eps}, {}, "var_eps")}, {}, "std");
  if (c.needs(0)) {
    Value *gain = b.create(Op::Div, {c.x(1), stddev}, {}, "gain");
    c.setGrad(0, b.create(Op::Mul, {c.dy(), reshapeTo(b, gain, perChannel)}, {}, "grad_x"));
  }
  if (c.needs(1)) {
    Value *centered = b.create(Op::Sub, {c.x(0), reshapeTo(b, c.x(3), perChannel)}, {}, "centered");
    Value *xhat = b.create(Op::Div, {centered, reshapeTo(b, stddev, perChannel)}, {}, "xhat");
    c.setGrad(1, sumPerChannel(b, b.create(Op::Mul, {c.dy(), xhat}, {}, "dy_xhat"), "grad_scale"));
  }
  if (c.needs(2))
    c.setGrad(2, sumPerChannel(b, c.dy(), "grad_bias"));
  return llvm::Error::success();
}

llvm::Error layerNormGrad(GradContext &c) {
  // One node gives all three; the bias's gradient is simply unused when
  // there is no bias. The statistics are computed again from x rather than
  // kept from the forward pass: a row's two sums cost less than the memory.
  Node *g = c.b().createNode(Op::LayerNormGrad, {c.x(0), c.x(1), c.dy()}, c.attrs(), "grad");
  for (unsigned i = 0; i < c.node().numOperands(); ++i)
    if (c.needs(i))
      c.setGrad(i, g->result(i));
  return llvm::Error::success();
}

llvm::Error softmaxCrossEntropyGrad(GradContext &c) {
  c.setGrad(0, c.create(Op::SoftmaxCrossEntropyGrad, {c.x(0), c.x(1), c.dy()}, c.attrs(), "grad"));
  return llvm::Error::success();
}

} // namespace

void registerNNGrads(GradRegistry &r) {
  r.add(Op::MatMul, matMulGrad);
  r.add(Op::Gemm, gemmGrad);
  r.add(Op::Conv, convGrad);
  r.add(Op::MaxPool, maxPoolGrad);
  r.add(Op::AveragePool, averagePoolGrad);
  r.add(Op::GlobalAveragePool, globalAveragePoolGrad);
  r.add(Op::BatchNormTrain, batchNormTrainGrad);
  r.add(Op::BatchNorm, batchNormInferenceGrad);
  r.add(Op::LayerNorm, layerNormGrad);
  r.add(Op::SoftmaxCrossEntropy, softmaxCrossEntropyGrad);
}

} // namespace graphc
