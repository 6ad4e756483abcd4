#include "passes/FuseBatchNormRelu.h"

#include "ir/Module.h"
#include "passes/InferenceFusion.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace graphc {

unsigned fuseBatchNormRelu(Module &m) {
  return fuseReluInto(m, {Op::BatchNorm, Op::BatchNormTrain});
}

/// The BatchNormTrainGrad that ReluGrad `rg` can become the mask of: `rg`
/// masks by a fused BatchNormTrain's result 0 and only that batch norm's
/// gradient reads it, as dy.
static Node *fusibleGradient(const Graph &g, const Node &rg) {
  const Value *y = rg.operand(0), *dy = rg.result();
  const Node *bn = y->producer();
  if (bn->op() != Op::BatchNormTrain || y != bn->result(0) ||
      bn->attrs().getString("activation") != "relu" || dy->users().size() != 1 ||
      llvm::is_contained(g.outputs(), dy))
    return nullptr;
  Node *grad = dy->users().front();
  if (grad->op() != Op::BatchNormTrainGrad || grad->numOperands() != 5 || grad->operand(4) != dy ||
      grad->operand(0) != bn->operand(0) || grad->operand(2) != bn->result(1) ||
      grad->operand(3) != bn->result(2))
    return nullptr;
  return grad;
}

unsigned fuseBatchNormReluGradients(Module &m) {
  unsigned fused = 0;
  for (Graph *g : m.graphs()) {
    llvm::SmallVector<std::pair<Node *, Node *>, 64> pairs; // (ReluGrad, its gradient)
    for (Node *n : g->nodes())
      if (n->op() == Op::ReluGrad)
        if (Node *grad = fusibleGradient(*g, *n))
          pairs.push_back({n, grad});
    for (auto [rg, grad] : pairs) {
      llvm::SmallVector<Value *, 6> operands(grad->operands().begin(), grad->operands().end());
      operands[4] = rg->operand(1);
      operands.push_back(rg->operand(0));
      grad->setOperands(operands);
      grad->attrs().set("activation", std::string("relu"));
      g->erase(rg);
      ++fused;
    }
  }
  return fused;
}

llvm::Expected<bool> fuseBatchNormReluPass(Module &m, const BatchNormReluOptions &o) {
  unsigned fused = fuseBatchNormRelu(m);
  if (o.gradients)
    fused += fuseBatchNormReluGradients(m);
  return fused > 0;
}

} // namespace graphc
