#include "ir/Clone.h"

#include "llvm/ADT/DenseMap.h"

namespace graphc {

std::vector<Value *> cloneGraphInto(const Graph &src, Graph &dst) {
  llvm::DenseMap<const Value *, Value *> map;
  for (const Node *n : src.nodes()) {
    llvm::SmallVector<Value *, 4> operands;
    for (const Value *v : n->operands())
      operands.push_back(map.lookup(v));
    llvm::SmallVector<TensorType, 2> types;
    std::vector<std::string> names;
    for (auto &r : n->results()) {
      types.push_back(r->type());
      names.push_back(r->name());
    }
    Node *c = dst.createNodeWithResultNames(n->op(), operands, types, names, n->attrs(), n->name());
    c->copyPlacementFrom(*n, /*assigned=*/true);
    for (unsigned i = 0; i < n->numResults(); ++i)
      map[n->result(i)] = c->result(i);
  }
  std::vector<Value *> outs;
  for (const Value *v : src.outputs())
    outs.push_back(map.lookup(v));
  return outs;
}

std::unique_ptr<Module> cloneModule(const Module &m, bool shareData) {
  auto c = std::make_unique<Module>(m.name());
  c->plan() = m.plan();
  for (const Variable &v : m.variables()) {
    Variable copy = v;
    if (!shareData)
      copy.data = v.data.clone();
    c->addVariable(std::move(copy));
  }
  for (const Graph *g : m.graphs()) {
    Graph &dst = c->addGraph(g->name());
    dst.setOutputs(cloneGraphInto(*g, dst));
  }
  return c;
}

} // namespace graphc
