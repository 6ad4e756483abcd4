//===- GpuLayoutRules.cpp - Which CUDA kernels take channels-last ---------===//

#include "kernels/cuda/GpuLayoutRules.h"

#include "kernels/Float16ViaF32.h"

#include "llvm/ADT/STLExtras.h"

#include <cassert>

namespace graphc {
namespace cuda {

namespace {

constexpr Layout kCL = Layout::ChannelsLast;

bool fourD(const Value *v) {
  return v->type().rank() == 4;
}

/// Every 4-D operand and result may be channels-last, each on its own.
void eachFourD(const Node &n, LayoutAnswers &a) {
  for (unsigned i = 0; i < n.numOperands(); ++i)
    if (fourD(n.operand(i)))
      a.allowOperand(i, kCL);
  for (unsigned i = 0; i < n.numResults(); ++i)
    if (fourD(n.result(i)))
      a.allowResult(i, kCL);
}

/// All of the node's tensors together, where all are 4-D and, for an
/// elementwise op (`sameShapes`), of the result's shape.
void following(const Node &n, bool sameShapes, LayoutAnswers &a) {
  auto fits = [&](const Value *v) {
    return fourD(v) && (!sameShapes || v->type().shape == n.result()->type().shape);
  };
  if (!llvm::all_of(n.operands(), fits) ||
      !llvm::all_of(n.results(), [&](const auto &r) { return fits(r.get()); }))
    return;
  eachFourD(n, a);
  a.follows = true;
}

bool isBatchNorm(Op op) {
  return op == Op::BatchNorm || op == Op::BatchNormTrain || op == Op::BatchNormTrainGrad;
}

/// A batch norm's tensors of x's shape: x, dy and the mask y (operands 0, 4,
/// 5 where they exist) and result 0 (y or dx); the rest are channel vectors.
bool batchNormData(const Node &n, unsigned operand) {
  return operand == 0 || (n.op() == Op::BatchNormTrainGrad && operand >= 4);
}

} // namespace

llvm::ArrayRef<Op> float16ViaF32Ops(DType narrow) {
  // Our own pooling and reductions are f32; convolutions have cuDNN's f16
  // and bf16 kernels (Conv.cpp), batch norms their own (BatchNorm.cpp). bf16
  // covers what the CPU has in bf16 (--precision bf16 sums bias gradients
  // and synchronized batch norms in f32, so no reduction is bf16).
  static const Op bf16[] = {Op::MaxPool, Op::AveragePool, Op::MaxPoolGrad, Op::AveragePoolGrad,
                            Op::GlobalAveragePool};
  static const Op f16[] = {Op::MaxPool,         Op::AveragePool,       Op::MaxPoolGrad,
                           Op::AveragePoolGrad, Op::GlobalAveragePool, Op::ReduceSum,
                           Op::ReduceMean};
  if (narrow == DType::BF16)
    return bf16;
  if (narrow == DType::F16)
    return f16;
  return {};
}

bool convComputesChannelsLast(const Node &n, GpuLayout policy) {
  return isConvolution(n.op()) && fourD(n.operand(0)) &&
         channelsLastFor(policy, n.operand(0)->type().dtype);
}

LayoutAnswers ownGpuLayoutAnswers(const Node &n, GpuLayout policy) {
  LayoutAnswers a = LayoutAnswers::plainOnly(n);
  switch (n.op()) {
  case Op::Conv:
  case Op::ConvGradData:
  case Op::ConvGradFilter:
    if (!convComputesChannelsLast(n, policy))
      break;
    eachFourD(n, a);
    for (unsigned i = 0; i < n.numOperands(); ++i)
      if (fourD(n.operand(i)))
        a.preferOperands[i] = kCL;
    a.preferResults[0] = kCL;
    break;
  case Op::MaxPool:
  case Op::AveragePool:
  case Op::MaxPoolGrad:
  case Op::AveragePoolGrad:
    eachFourD(n, a);
    break;
  case Op::GlobalAveragePool:
    if (fourD(n.operand(0)))
      a.allowOperand(0, kCL);
    break;
  case Op::BatchNorm:
  case Op::BatchNormTrain:
  case Op::BatchNormTrainGrad:
    if (!fourD(n.operand(0)))
      break;
    for (unsigned i = 0; i < n.numOperands(); ++i)
      if (batchNormData(n, i))
        a.allowOperand(i, kCL);
    a.allowResult(0, kCL);
    break;
  case Op::Cast:
    if (n.operand(0)->type().dtype != n.result()->type().dtype &&
        isFloat(n.operand(0)->type().dtype) && isFloat(n.result()->type().dtype))
      eachFourD(n, a);
    else
      following(n, /*sameShapes=*/true, a);
    break;
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::ReluGrad:
  case Op::LeakyReluGrad:
  case Op::SigmoidGrad:
  case Op::TanhGrad:
  case Op::ClipGrad:
  case Op::ErfGrad:
  case Op::GeluGrad:
  case Op::HardSigmoidGrad:
  case Op::HardSwishGrad:
  case Op::Relu:
  case Op::LeakyRelu:
  case Op::Sigmoid:
  case Op::Tanh:
  case Op::Exp:
  case Op::Log:
  case Op::Sqrt:
  case Op::Neg:
  case Op::Clip:
  case Op::Erf:
  case Op::Gelu:
  case Op::HardSigmoid:
  case Op::HardSwish:
  case Op::AddN:
  case Op::Identity:
  case Op::Dropout:
    following(n, /*sameShapes=*/true, a);
    break;
  case Op::Concat:
  case Op::Split:
  case Op::ConcatBatch:
  case Op::SplitBatch:
    following(n, /*sameShapes=*/false, a);
    break;
  default:
    break;
  }
  return a;
}

LayoutCopies gpuLayoutCopies(const Node &n, GpuLayout policy, llvm::ArrayRef<Layout> operands,
                             llvm::ArrayRef<Layout> results) {
  assert(operands.size() == n.numOperands() && results.size() == n.numResults());
  LayoutCopies c;
  const DType t = kernelDType(n);
  if (isConvolution(n.op())) {
    if (!convComputesChannelsLast(n, policy))
      return c;
    // A tensor of the data type is transposed on its own; f32 weights or an
    // f32 filter gradient beside 16-bit data are converted anyway.
    auto count = [&](const Value *v, Layout l) {
      if (!fourD(v) || l == kCL)
        return;
      ++(v->type().dtype == t ? c.separate : c.fused);
    };
    for (unsigned i = 0; i < n.numOperands(); ++i)
      count(n.operand(i), operands[i]);
    count(n.result(), results[0]);
    return c;
  }
  if (n.op() == Op::Cast) {
    c.fused += operands[0] != results[0];
    return c;
  }
  if (isBatchNorm(n.op())) {
    // It computes in the layout of x; the others of x's shape are transposed.
    for (unsigned i = 1; i < n.numOperands(); ++i)
      c.separate += batchNormData(n, i) && operands[i] != operands[0];
    c.separate += results[0] != operands[0];
    return c;
  }
  if (llvm::is_contained(float16ViaF32Ops(t), n.op())) {
    // A 16-bit tensor the f32 kernel cannot take in its layout is moved to
    // plain by the widening or rounding.
    LayoutAnswers inner = ownGpuLayoutAnswers(n, policy);
    for (unsigned i = 0; i < n.numOperands(); ++i)
      c.fused += n.operand(i)->type().dtype == t && !inner.accepts(i, operands[i]);
    for (unsigned i = 0; i < n.numResults(); ++i)
      c.fused += n.result(i)->type().dtype == t && !inner.produces(i, results[i]);
  }
  return c;
}

LayoutAnswers gpuLayoutAnswers(const Node &n, GpuLayout policy) {
  const DType t = kernelDType(n);
  if (llvm::is_contained(float16ViaF32Ops(t), n.op()))
    return float16ViaF32Layouts(n, t, ownGpuLayoutAnswers(n, policy), kCL);
  return ownGpuLayoutAnswers(n, policy);
}

} // namespace cuda
} // namespace graphc
