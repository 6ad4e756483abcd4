//===- AddLoss.cpp - Softmax cross-entropy on the model's logits ------------===//
//
// The loss weights are folded into the cross-entropy's `scale` (1/B, w/B), so
// the auxiliary head costs no extra multiply and its gradient op carries the
// weight directly.
//
//===----------------------------------------------------------------------===//

#include "passes/AddLoss.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"

namespace graphc {
namespace {

llvm::Error checkLogits(const Value *v, unsigned index, int64_t batch) {
  const TensorType &t = v->type();
  if (t.rank() != 2 || t.shape[0] != batch ||
      (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16))
    return makeError("add-loss: graph output " + llvm::Twine(index) + " '" + v->name() +
                     "' must be floating-point logits [" + llvm::Twine(batch) + ", classes], got " +
                     toString(t));
  return llvm::Error::success();
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
  for (unsigned i = 0; i < outputs.size(); ++i)
    if (auto e = checkLogits(outputs[i], i, *batch))
      return e;

  Builder b(*g);
  TensorType labelType(DType::I64, {*batch});
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
  auto crossEntropy = [&](Value *logits, double weight, llvm::StringRef leaf) {
    Attrs a;
    a.set("scale", weight / (double)*batch);
    return b.create(Op::SoftmaxCrossEntropy, {logitsOf(logits), labels}, std::move(a), leaf);
  };
  Value *loss = crossEntropy(outputs[0], 1.0, "cross_entropy");
  if (outputs.size() == 2) {
    Value *aux = crossEntropy(outputs[1], opts.auxLossWeight, "aux_cross_entropy");
    loss = b.create(Op::Add, {loss, aux}, {}, "total");
  }
  llvm::SmallVector<Value *, 3> newOutputs{loss};
  newOutputs.append(outputs.begin(), outputs.end());
  g->setOutputs(newOutputs);
  return true;
}

} // namespace graphc
