//===- AddLoss.cpp - The loss on the model's output -----------------------===//
//
// The loss weights are folded into the loss op's `scale` (1/B, w/B), so the
// auxiliary head costs no extra multiply and its gradient op carries the
// weight directly.
//
//===----------------------------------------------------------------------===//

#include "passes/AddLoss.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"

namespace graphc {
namespace {

llvm::Error checkOutput(const Value *v, unsigned index, int64_t batch, LossKind kind) {
  const TensorType &t = v->type();
  const bool floating = t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16;
  if (kind == LossKind::Mse) {
    if (t.rank() < 1 || t.shape[0] != batch || !floating)
      return makeError("add-loss: graph output " + llvm::Twine(index) + " '" + v->name() +
                       "' must be floating point with the batch " + llvm::Twine(batch) +
                       " at axis 0 for --loss mse, got " + toString(t));
    return llvm::Error::success();
  }
  if (t.rank() != 2 || t.shape[0] != batch || !floating)
    return makeError("add-loss: graph output " + llvm::Twine(index) + " '" + v->name() +
                     "' must be floating-point " +
                     (kind == LossKind::Nll ? "log-probabilities" : "logits") + " [" +
                     llvm::Twine(batch) + ", classes] for --loss " + modeName(kind) + ", got " +
                     toString(t));
  return llvm::Error::success();
}

/// What the labels input holds: class indices, or MSE's targets shaped like
/// the output in f32.
TensorType labelTypeFor(const Value *output, int64_t batch, LossKind kind) {
  if (kind != LossKind::Mse)
    return TensorType(DType::I64, {batch});
  return TensorType(DType::F32, output->type().shape);
}

} // namespace

Value *logitsOf(Value *output) {
  const Node *n = output->producer();
  if ((n->op() != Op::Softmax && n->op() != Op::LogSoftmax) || output->type().rank() != 2)
    return output;
  const int64_t axis = n->attrs().getInt("axis", -1);
  return axis == 1 || axis == -1 ? n->operand(0) : output;
}

llvm::Expected<bool> addLoss(Module &m, const LossOptions &opts) {
  Graph *g = m.findGraph("main");
  if (!g)
    return makeError("add-loss: the module has no graph 'main'");
  std::optional<int64_t> batch = m.batch();
  if (!batch)
    return makeError("add-loss: the batch is not bound; run bind-batch with --batch first (the "
                     "loss is the mean over the global batch)");
  llvm::SmallVector<Value *, 2> outputs(g->outputs().begin(), g->outputs().end());
  if (outputs.empty() || outputs.size() > 2)
    return makeError("add-loss: expects the logits as graph output 0 and optionally auxiliary "
                     "logits as output 1; graph '" +
                     g->name() + "' has " + llvm::Twine(outputs.size()) + " outputs");
  if (opts.kind == LossKind::Mse && outputs.size() == 2)
    return makeError("add-loss: --loss mse takes one output; graph '" + g->name() +
                     "' has an auxiliary output too");
  for (unsigned i = 0; i < outputs.size(); ++i)
    if (auto e = checkOutput(outputs[i], i, *batch, opts.kind))
      return e;

  Builder b(*g);
  TensorType labelType = labelTypeFor(outputs[0], *batch, opts.kind);
  Value *labels;
  if (Node *existing = g->findNode("labels")) {
    if (existing->op() != Op::Input || existing->result()->type() != labelType)
      return nodeError(*existing, "add-loss needs the name 'labels' for an Input of type " +
                                      toString(labelType));
    labels = existing->result();
  } else {
    labels = b.input("labels", labelType);
  }

  Builder::Scope scope(b, "loss");
  auto lossOf = [&](Value *output, double weight, llvm::StringRef leaf) {
    Attrs a;
    if (opts.kind == LossKind::Mse) {
      a.set("scale", weight / (double)output->type().numElements());
      a.set("loss", modeName(opts.kind).str());
      return b.create(Op::SoftmaxCrossEntropy, {output, labels}, std::move(a), leaf);
    }
    a.set("scale", weight / (double)*batch);
    if (opts.kind == LossKind::Nll) {
      a.set("loss", modeName(opts.kind).str());
      return b.create(Op::SoftmaxCrossEntropy, {output, labels}, std::move(a), leaf);
    }
    return b.create(Op::SoftmaxCrossEntropy, {logitsOf(output), labels}, std::move(a), leaf);
  };
  const char *leaf = opts.kind == LossKind::Mse   ? "mse"
                     : opts.kind == LossKind::Nll ? "nll"
                                                  : "cross_entropy";
  Value *loss = lossOf(outputs[0], 1.0, leaf);
  if (outputs.size() == 2) {
    Value *aux = lossOf(outputs[1], opts.auxLossWeight, ("aux_" + llvm::Twine(leaf)).str());
    loss = b.create(Op::Add, {loss, aux}, {}, "total");
  }
  if (opts.kind != LossKind::CrossEntropy)
    m.plan().loss = opts.kind;
  llvm::SmallVector<Value *, 3> newOutputs{loss};
  newOutputs.append(outputs.begin(), outputs.end());
  g->setOutputs(newOutputs);
  return true;
}

} // namespace graphc
