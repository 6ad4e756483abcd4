#include "passes/InferenceFusion.h"

#include "ir/Module.h"

#include "llvm/ADT/SmallVector.h"

namespace graphc {

unsigned fuseConvRelu(Module &m) {
  unsigned fused = 0;
  for (Graph *g : m.graphs()) {
    llvm::SmallVector<Node *, 64> relus;
    for (Node *n : g->nodes()) {
      if (n->op() != Op::Relu)
        continue;
      Value *x = n->operand(0);
      Node *conv = x->producer();
      if (conv->op() != Op::Conv || conv->attrs().has("activation") || x->users().size() != 1 ||
          llvm::is_contained(g->outputs(), x))
        continue;
      relus.push_back(n);
    }
    for (Node *relu : relus) {
      Node *conv = relu->operand(0)->producer();
      conv->attrs().set("activation", std::string("relu"));
      relu->result()->replaceAllUsesWith(conv->result());
      g->erase(relu);
      ++fused;
    }
  }
  return fused;
}

} // namespace graphc
