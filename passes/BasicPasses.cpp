//===- BasicPasses.cpp - verify, infer-shapes, bind-batch, dce --------------===//
//
// The small passes every pipeline starts with, and dead-code elimination:
// a node is live if a graph output or a variable update depends on it.
//
//===----------------------------------------------------------------------===//

#include "passes/BasicPasses.h"

#include "ir/ShapeInference.h"
#include "ir/Verifier.h"

#include "llvm/ADT/DenseSet.h"

namespace graphc {

bool keepWhatRootsNeed(Graph &g, llvm::ArrayRef<const Node *> roots) {
  llvm::DenseSet<const Node *> live;
  live.reserve(g.numNodes());
  llvm::SmallVector<const Node *, 64> work(roots.begin(), roots.end());
  while (!work.empty()) {
    const Node *n = work.pop_back_val();
    if (!live.insert(n).second)
      continue;
    for (Value *v : n->operands())
      work.push_back(v->producer());
  }
  if (live.size() == g.numNodes())
    return false;
  g.eraseIf([&](const Node &n) { return !live.count(&n); });
  return true;
}

bool eliminateDeadCode(Graph &g) {
  std::vector<const Node *> roots;
  for (Value *v : g.outputs())
    roots.push_back(v->producer());
  for (Node *n : g.nodes())
    if (isVariableUpdate(n->op()) || n->op() == Op::Input || isCollective(n->op()))
      roots.push_back(n);
  return keepWhatRootsNeed(g, roots);
}

bool eliminateDeadCode(Module &m) {
  bool changed = false;
  for (Graph *g : m.graphs())
    changed |= eliminateDeadCode(*g);
  return changed;
}

void registerBasicPasses(PassRegistry &r) {
  r.add("verify", "check the module's structure and types", [](const CompileOptions &) {
    return std::make_unique<FunctionPass>("verify", [](Module &m) -> llvm::Expected<bool> {
      if (auto e = verify(m))
        return e;
      return false;
    });
  });
  r.add("infer-shapes", "recompute every result type from the shape functions",
        [](const CompileOptions &) {
          return std::make_unique<FunctionPass>("infer-shapes",
                                                [](Module &m) -> llvm::Expected<bool> {
                                                  if (auto e = inferShapes(m))
                                                    return e;
                                                  return true;
                                                });
        });
  r.add("bind-batch", "bind the symbolic batch dimension to --batch", [](const CompileOptions &o) {
    return std::make_unique<FunctionPass>("bind-batch",
                                          [batch = o.batch](Module &m) -> llvm::Expected<bool> {
                                            if (batch <= 0)
                                              return false;
                                            if (auto b = m.batch(); b && *b == batch)
                                              return false;
                                            if (auto e = bindBatch(m, batch))
                                              return e;
                                            return true;
                                          });
  });
  r.add("dce", "remove nodes no output or variable update depends on", [](const CompileOptions &) {
    return std::make_unique<FunctionPass>(
        "dce", [](Module &m) -> llvm::Expected<bool> { return eliminateDeadCode(m); });
  });
}

} // namespace graphc
