//===- Cost.cpp - Arithmetic and memory traffic of one node ----------------===//
//
// One rule per op family. Elementwise counts are per output element unless
// said otherwise; they are deliberately simple (a kernel may fuse or fold) and
// their only promise is to be stable and in proportion. MACs are exact for
// the contractions.
//
//===----------------------------------------------------------------------===//

#include "ir/Cost.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>

namespace graphc {
namespace {

struct CostCtx {
  const Node &n;
  int64_t batch;

  int64_t elems(const Value *v) const { return v->type().numElements(batch); }
  int64_t in(unsigned i) const { return elems(n.operand(i)); }
  int64_t out(unsigned i = 0) const { return elems(n.result(i)); }
  int64_t operandBytes() const {
    int64_t b = 0;
    for (const Value *v : n.operands())
      b += v->type().bytes(batch);
    return b;
  }
  int64_t resultBytes() const {
    int64_t b = 0;
    for (const auto &r : n.results())
      b += r->type().bytes(batch);
    return b;
  }
  /// Reads every operand, writes every result, `flops` operations.
  NodeCost streaming(int64_t flops, int64_t macs = 0) const {
    return NodeCost{macs, flops, operandBytes(), resultBytes()};
  }
  /// Product of the spatial window (kernel_shape), 1 when absent.
  int64_t windowSize() const {
    int64_t k = 1;
    for (int64_t d : n.attrs().getInts("kernel_shape"))
      k *= d;
    return k;
  }
};

/// Per-output-element cost of the elementwise ops.
int64_t elementwiseFlops(Op op) {
  switch (op) {
  case Op::LeakyRelu:     // compare, multiply
  case Op::Clip:          // min, max
  case Op::LeakyReluGrad: // compare, multiply
  case Op::ClipGrad:      // two compares, select
    return 2;
  case Op::SigmoidGrad:     // dy * y * (1 - y)
  case Op::TanhGrad:        // dy * (1 - y * y)
  case Op::HardSigmoid:     // multiply-add, clamp
  case Op::HardSigmoidGrad: // multiply-add, two compares, select
    return 3;
  case Op::Sigmoid:        // 1 / (1 + exp(-x))
  case Op::SoftmaxGrad:    // y * (dy - sum(dy * y))
  case Op::LogSoftmaxGrad: // dy - exp(y) * sum(dy)
    return 4;
  case Op::Softmax:       // max, subtract, exp, sum, divide
  case Op::LogSoftmax:    // max, subtract, exp, sum, log-subtract
  case Op::HardSwish:     // add, clamp, multiply, divide
  case Op::HardSwishGrad: // two compares, divide, add, multiply
  case Op::ErfGrad:       // dy * 2/sqrt(pi) * exp(-x * x)
    return 5;
  case Op::Gelu: // 0.5 * x * (1 + erf(x / sqrt 2)), or the tanh form's few more
    return 6;
  case Op::GeluGrad: // the cdf, the density's exp, and the product rule
    return 9;
  default: // arithmetic, Relu, ReluGrad (a select), one transcendental function
    return 1;
  }
}

/// Variable updates touch the variable and its slots besides their operands.
NodeCost updateCost(const CostCtx &c) {
  const Module &m = c.n.graph().module();
  const Variable *var = m.findVariable(c.n.attrs().getString("var"));
  assert(var && "update of an unknown variable: verify the module first");
  int64_t elems = var->type.numElements();
  int64_t stateBytes = var->type.bytes();
  for (const std::string &slot : c.n.attrs().getStrings("slots")) {
    const Variable *s = m.findVariable(slot);
    assert(s && "update with an unknown slot: verify the module first");
    stateBytes += s->type.bytes();
  }
  int64_t varBytes = var->type.bytes();
  if (c.n.attrs().has("nranks")) { // a sharded update touches its piece only
    elems = c.n.operand(0)->type().numElements();
    varBytes = elems * (int64_t)dtypeSize(var->type.dtype);
    stateBytes = varBytes * (1 + (int64_t)c.n.attrs().getStrings("slots").size());
  }
  int64_t perElem = 0;
  switch (c.n.op()) {
  case Op::Assign:
    perElem = 0;
    break;
  case Op::ApplySGD: // w -= lr * g
    perElem = 2;
    break;
  case Op::ApplyMomentum: // v = mu * v + g; w -= lr * v (Nesterov: w -= lr * (g + mu * v))
    perElem = c.n.attrs().getInt("nesterov") ? 6 : 4;
    break;
  case Op::ApplyRMSProp: // ms = rho ms + (1-rho) g^2; mom = mu mom + lr g / sqrt(ms + eps); w -=
                         // mom
    perElem = 11;
    break;
  case Op::ApplyAdam: // m, v moments; w -= lr_t * m / (sqrt(v) + eps)
    perElem = 12;
    break;
  case Op::LossScaleStep: // a few scalar operations on three scalars
    perElem = 4;
    break;
  default:
    llvm_unreachable("not a variable update");
  }
  if (c.n.numOperands() == 3) // an Apply under loss scaling: g / scale
    perElem += 1;
  if (c.n.op() != Op::Assign && c.n.attrs().getFloat("weight_decay") != 0)
    perElem += 2; // g + wd * w
  bool readsVar = c.n.op() != Op::Assign;
  return NodeCost{0, perElem * elems,
                  c.operandBytes() + (readsVar ? stateBytes : stateBytes - varBytes), stateBytes};
}

NodeCost convCost(const CostCtx &c, const TensorType &filter, const Value *outGrad,
                  int64_t biasElems) {
  // Each element of the conv's output (or of its gradient) is a dot product
  // over C/group × kh × kw inputs.
  int64_t window = 1;
  for (size_t i = 1; i < filter.rank(); ++i)
    window *= filter.shape[i];
  int64_t macs = c.elems(outGrad) * window;
  return c.streaming(2 * macs + biasElems, macs);
}

} // namespace

NodeCost nodeCost(const Node &n, int64_t batch) {
  CostCtx c{n, batch};
  // No default: a new op in Ops.def does not compile until it has a rule here.
  switch (n.op()) {
  case Op::Input:
  case Op::Variable:
  case Op::Constant:
  case Op::Identity:
  case Op::Reshape:
  case Op::Flatten:
  case Op::Squeeze:
  case Op::Unsqueeze:
    return {};

  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
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
  case Op::Softmax:
  case Op::LogSoftmax:
  case Op::ReluGrad:
  case Op::LeakyReluGrad:
  case Op::SigmoidGrad:
  case Op::TanhGrad:
  case Op::SoftmaxGrad:
  case Op::LogSoftmaxGrad:
  case Op::ClipGrad:
  case Op::ErfGrad:
  case Op::GeluGrad:
  case Op::HardSigmoidGrad:
  case Op::HardSwishGrad:
  case Op::Equal:
  case Op::Less:
  case Op::Greater:
  case Op::Not:
  case Op::Where: // a select
    return c.streaming(elementwiseFlops(n.op()) * c.out());

  // Copies: no arithmetic.
  case Op::Cast:
  case Op::Dropout: // inference: the identity, kept as a copy
  case Op::Transpose:
  case Op::Concat:
  case Op::Split:
  case Op::Pad:
  case Op::Expand:
  case Op::SplitBatch:
  case Op::ConcatBatch:
  case Op::Transfer:
    return c.streaming(0);
  case Op::Slice: // reads only what it keeps
    return {0, 0, c.resultBytes(), c.resultBytes()};
  case Op::Gather: // the selected rows and the indices
    return {0, 0, c.resultBytes() + n.operand(1)->type().bytes(batch), c.resultBytes()};

  case Op::MatMul: {
    const TensorType &a = n.operand(0)->type();
    int64_t macs = c.out() * a.shape.back();
    return c.streaming(2 * macs, macs);
  }
  case Op::Gemm: {
    const TensorType &a = n.operand(0)->type();
    int64_t k = a.shape[n.attrs().getInt("transA") ? 0 : 1];
    int64_t macs = c.out() * k;
    return c.streaming(2 * macs + (n.numOperands() == 3 ? c.out() : 0), macs);
  }
  case Op::Conv:
    // A bias and a fused addend (inference) each add one value per output.
    return convCost(c, n.operand(1)->type(), n.result(), (n.numOperands() - 2) * c.out());
  case Op::ConvGradData: // dy, w
    return convCost(c, n.operand(1)->type(), n.operand(0), 0);
  case Op::ConvGradFilter: // x, dy
    return convCost(c, n.result()->type(), n.operand(1), 0);

  case Op::MaxPool: // a compare per window element
    return c.streaming(c.out() * c.windowSize());
  case Op::AveragePool: // a sum per window element, a divide
    return c.streaming(c.out() * (c.windowSize() + 1));
  case Op::GlobalAveragePool:
    return c.streaming(c.in(0) + c.out());
  case Op::MaxPoolGrad: // x, dy: finds each window's maximum again, routes dy to it
    return c.streaming(c.in(1) * c.windowSize());
  case Op::AveragePoolGrad: // spreads each gradient element over its window
    return c.streaming(c.in(0) * (c.windowSize() + 1));

  case Op::BatchNorm: { // y = a x + b with a, b folded per channel
    int64_t channels = n.operand(1)->type().numElements();
    return c.streaming(2 * c.out() + 4 * channels);
  }
  case Op::BatchNormTrain: { // mean, variance, normalize and scale
    int64_t channels = n.operand(1)->type().numElements();
    return c.streaming(6 * c.in(0) + 4 * channels);
  }
  case Op::BatchNormTrainGrad: { // x-hat, two reductions, the dx formula (and a fused ReLU's mask)
    int64_t channels = n.operand(1)->type().numElements();
    int64_t mask = n.numOperands() == 6 ? c.in(0) : 0;
    return c.streaming(9 * c.in(0) + mask + 6 * channels);
  }
  case Op::LayerNorm: // mean and variance (two passes), normalize, scale and shift
    return c.streaming(7 * c.in(0));
  case Op::LayerNormGrad: // statistics again, x-hat, two row sums, dx, two column sums
    return c.streaming(14 * c.in(0));
  case Op::DropoutTrain: // draw, compare, scale
    return c.streaming(3 * c.in(0));

  case Op::ReduceMean:
    return c.streaming(c.in(0) + c.out());
  case Op::ReduceSum:
    return c.streaming(c.in(0));

  case Op::SoftmaxCrossEntropy: // log-softmax per logit; pick and sum per row; scale
    return c.streaming(5 * c.in(0) + 2 * c.in(1) + 1);
  case Op::SoftmaxCrossEntropyGrad: // softmax, minus one-hot, scale
    return c.streaming(7 * c.in(0));
  case Op::GatherGrad: // zero-fill and scatter-add of dy
    return c.streaming(c.in(1));

  case Op::Assign:
  case Op::ApplySGD:
  case Op::ApplyMomentum:
  case Op::ApplyRMSProp:
  case Op::ApplyAdam:
  case Op::LossScaleStep:
    return updateCost(c);
  case Op::CheckFinite: { // one test per element
    int64_t elems = 0;
    for (unsigned i = 0; i < n.numOperands(); ++i)
      elems += c.in(i);
    return c.streaming(elems);
  }

  case Op::AddN:
    return c.streaming((int64_t)(n.numOperands() - 1) * c.out());
  case Op::AllReduce:
  case Op::ReduceScatter: {
    // A ring all-reduce (or its first half) adds (nranks - 1) / nranks of
    // each tensor per rank.
    int64_t ranks = std::max<int64_t>(1, n.attrs().getInt("nranks", 1));
    int64_t total = 0;
    for (const Value *v : n.operands())
      total += c.elems(v);
    return c.streaming(total * (ranks - 1) / ranks);
  }
  case Op::AllGather: // copies only
    return {};
  }
  llvm_unreachable("unknown op");
}

int64_t sumLength(const Node &n, int64_t batch) {
  auto elems = [&](const Value *v) { return std::max<int64_t>(1, v->type().numElements(batch)); };
  auto lastDim = [](const Value *v) { return std::max<int64_t>(1, v->type().shape.back()); };
  if (int64_t macs = nodeCost(n, batch).macs)
    return macs / elems(n.result());
  switch (n.op()) {
  case Op::BatchNormTrain: // statistics over N·H·W per channel
  case Op::BatchNormTrainGrad: {
    const TensorType &x = n.operand(0)->type();
    return x.rank() >= 2 && x.shape[1] > 0 ? elems(n.operand(0)) / x.shape[1] : 1;
  }
  case Op::ReduceSum:
  case Op::ReduceMean:
  case Op::GlobalAveragePool:
    return elems(n.operand(0)) / elems(n.result());
  case Op::GatherGrad: // the rows that gather each table row, at most all of them
    return elems(n.operand(0)) / lastDim(n.operand(0));
  case Op::AveragePool:
  case Op::AveragePoolGrad:
  case Op::MaxPoolGrad: { // overlapping windows add up to a window of contributions
    int64_t k = 1;
    for (int64_t d : n.attrs().getInts("kernel_shape"))
      k *= d;
    return k;
  }
  case Op::Softmax:
  case Op::LogSoftmax:
  case Op::SoftmaxGrad:
  case Op::LogSoftmaxGrad:
  case Op::SoftmaxCrossEntropyGrad:
    return lastDim(n.operand(0));
  case Op::LayerNorm: // each sample's statistics over the normalised axes
    return elems(n.operand(1));
  case Op::LayerNormGrad: // and dscale, dbias over the samples
    return std::max(elems(n.operand(1)), elems(n.operand(0)) / elems(n.operand(1)));
  case Op::SoftmaxCrossEntropy: // each row's log-sum over classes, the mean over rows
    return std::max(lastDim(n.operand(0)), elems(n.operand(0)) / lastDim(n.operand(0)));
  case Op::AddN:
    return n.numOperands();
  case Op::AllReduce:
  case Op::ReduceScatter:
    return std::max<int64_t>(1, n.attrs().getInt("nranks", 1));
  default:
    return 1;
  }
}

int64_t longestSum(const Graph &g, int64_t batch) {
  int64_t k = 1;
  auto elems = [&](const Value *v) { return std::max<int64_t>(1, v->type().numElements(batch)); };
  for (const Node *n : g.nodes()) {
    k = std::max(k, sumLength(*n, batch));
    // The gradients a forward graph implies: per-channel sums over N·H·W of
    // computed values (batch statistics, bias and filter gradients; nothing
    // sums a model's input or weights over their own N·H·W), a product's
    // weight gradient over its rows and data gradient over its columns, a
    // convolution's data gradient over output channels per group times the
    // window.
    const bool source = n->op() == Op::Input || n->op() == Op::Variable || n->op() == Op::Constant;
    for (const auto &r : n->results())
      if (!source && r->type().rank() == 4 && r->type().shape[1] > 0)
        k = std::max(k, elems(r.get()) / r->type().shape[1]);
    if (n->op() == Op::MatMul || n->op() == Op::Gemm) {
      const TensorType &out = n->result()->type();
      if (out.rank() >= 1 && out.shape.back() > 0)
        k = std::max({k, out.shape.back(), elems(n->result()) / out.shape.back()});
    }
    if (n->op() == Op::Conv) {
      const TensorType &w = n->operand(1)->type();
      int64_t taps = w.numElements() / std::max<int64_t>(1, w.shape[0] * w.shape[1]);
      k = std::max(k, w.shape[0] / std::max<int64_t>(1, n->attrs().getInt("group", 1)) * taps);
    }
  }
  return k;
}

int64_t collectiveRingBytes(const Node &n, int64_t batch) {
  int64_t bytes = 0;
  for (const Value *v : n.operands())
    bytes += v->type().bytes(batch);
  switch (n.op()) {
  case Op::AllReduce:
    return bytes;
  case Op::ReduceScatter: // the all-reduce's first half
    return bytes / 2;
  case Op::AllGather: { // its second half, over the whole variable
    const Variable *v = n.graph().module().findVariable(n.attrs().getString("var"));
    return v ? v->type.bytes() / 2 : 0;
  }
  default:
    return 0;
  }
}

} // namespace graphc
