//===- MixedPrecision.cpp - 16-bit compute, f32 master weights ------------===//
//
// One walk in graph order decides each node's precision from its operands
// (which are final by then), rewrites its operands through Casts where they
// disagree, and retypes its results. Casts are appended, then moved after the
// producers of what they convert.
//
//===----------------------------------------------------------------------===//

#include "passes/MixedPrecision.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Sequence.h"

#include <algorithm>

namespace graphc {
namespace {

/// Ops that compute in 16 bits when their data operand is 16-bit. The first
/// `data` operands are activations; the rest (BatchNormTrain's scale and
/// bias) stay f32.
struct Follower {
  Op op;
  unsigned data; ///< leading operands that are data; ~0u: all
  bool allData;  ///< every data operand must already be bf16 (Add, Concat)
};

constexpr Follower kFollowers[] = {
    {Op::BatchNormTrain, 1, false},
    {Op::Relu, ~0u, false},
    {Op::MaxPool, ~0u, false},
    {Op::AveragePool, ~0u, false},
    {Op::GlobalAveragePool, ~0u, false},
    {Op::DropoutTrain, ~0u, false},
    {Op::Add, ~0u, true},
    {Op::Concat, ~0u, true},
};

const Follower *followerOf(Op op) {
  for (const Follower &f : kFollowers)
    if (f.op == op)
      return &f;
  return nullptr;
}

class Rewriter {
public:
  /// `low`: bf16 or f16. f16 convolutions read f16 weights (cuDNN takes
  /// one type); bf16 ones read the f32 weights.
  Rewriter(Graph &g, DType low) : g_(g), low_(low), lowWeights_(low == DType::F16) {}

  void run() {
    std::vector<Node *> order(g_.nodes().begin(), g_.nodes().end());
    for (Node *n : order)
      visit(*n);
    llvm::SmallVector<Value *, 4> outputs(g_.outputs().begin(), g_.outputs().end());
    for (Value *&v : outputs)
      if (v->type().dtype == low_)
        v = cast(v, DType::F32);
    g_.setOutputs(outputs);
    g_.moveAfter(moves_);
  }

  bool changed() const { return !moves_.empty(); }

private:
  void visit(Node &n) {
    unsigned data = 0;
    if (n.op() == Op::Conv) {
      // bf16: the weights and bias stay f32 (the kernel converts them).
      data = lowWeights_ ? n.numOperands() : 1;
    } else if (const Follower *f = followerOf(n.op())) {
      data = std::min(f->data, n.numOperands());
      bool lead = data > 0 && n.operand(0)->type().dtype == low_;
      bool all = llvm::all_of(llvm::seq(0u, data),
                              [&](unsigned i) { return n.operand(i)->type().dtype == low_; });
      if (!(f->allData ? all : lead))
        data = 0;
    }
    if (data == 0 || n.result(0)->type().dtype != DType::F32) {
      // Computes in f32: bf16 operands come back to f32.
      for (unsigned i = 0; i < n.numOperands(); ++i)
        if (n.operand(i)->type().dtype == low_)
          n.setOperand(i, cast(n.operand(i), DType::F32));
      return;
    }
    for (unsigned i = 0; i < n.numOperands(); ++i) {
      DType want = i < data ? low_ : DType::F32;
      if (isFloat(n.operand(i)->type().dtype) && n.operand(i)->type().dtype != want)
        n.setOperand(i, cast(n.operand(i), want));
    }
    // The data results follow: BatchNormTrain's statistics stay f32.
    unsigned retype = n.op() == Op::BatchNormTrain ? 1 : n.numResults();
    for (unsigned i = 0; i < retype; ++i)
      if (n.result(i)->type().dtype == DType::F32)
        n.result(i)->setType(TensorType(low_, n.result(i)->type().shape));
  }

  /// `v` converted to `to`, one Cast per value and dtype.
  Value *cast(Value *v, DType to) {
    Value *&c = casts_[{v, (int)to}];
    if (c)
      return c;
    Node *p = v->producer();
    Builder b = Builder::like(*p);
    Attrs a;
    a.set("to", to);
    std::string name = v->name();
    std::replace(name.begin(), name.end(), ':', '_');
    Node *node = b.createNode(Op::Cast, {v}, std::move(a), name + "/to_" + dtypeName(to).str());
    moves_.push_back({node, p});
    return c = node->result(0);
  }

  Graph &g_;
  const DType low_;
  const bool lowWeights_;
  llvm::DenseMap<std::pair<Value *, int>, Value *> casts_;
  std::vector<std::pair<Node *, Node *>> moves_;
};

} // namespace

llvm::Expected<bool> applyMixedPrecision(Module &m, const PrecisionOptions &opts) {
  if (opts.precision == Precision::FP32)
    return false;
  Graph *g = m.findGraph("main");
  if (!g)
    return makeError("mixed-precision: the module has no graph 'main'");
  // The model's own floats must be f32: the pass decides what is bf16.
  auto notF32 = [&](llvm::StringRef what, llvm::StringRef name, DType t) {
    return makeError("--precision " + modeName(opts.precision) + ": " + what + " '" + name +
                     "' is " + dtypeName(t) + "; mixed precision starts from an f32 model");
  };
  for (const Variable &v : m.variables())
    if (isFloat(v.type.dtype) && v.type.dtype != DType::F32)
      return notF32("variable", v.name, v.type.dtype);
  for (const Node *in : g->inputs())
    if (DType t = in->result(0)->type().dtype; isFloat(t) && t != DType::F32)
      return notF32("input", in->name(), t);
  Rewriter r(*g, opts.precision == Precision::FP16 ? DType::F16 : DType::BF16);
  r.run();
  // A model with no convolution has nothing to compute in 16 bits: it stays f32.
  if (r.changed())
    m.plan().precision = opts.precision;
  return r.changed();
}

} // namespace graphc
