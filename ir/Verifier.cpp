#include "ir/Verifier.h"

#include "ir/Diagnostics.h"
#include "ir/OpAttrs.h"
#include "ir/ShapeInference.h"

#include "llvm/ADT/DenseSet.h"

namespace graphc {

static llvm::Error verifyGraph(const Graph &g) {
  llvm::DenseSet<const Value *> defined;
  defined.reserve(g.numNodes() + g.numNodes() / 4);
  // The walk waits on memory more than it computes: fetch the nodes a few
  // steps ahead, and the values the next ones read and define.
  std::vector<const Node *> nodes(g.nodes().begin(), g.nodes().end());
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node *n = nodes[k];
    if (k + 8 < nodes.size())
      __builtin_prefetch(nodes[k + 8]);
    if (k + 4 < nodes.size()) {
      const Node *next = nodes[k + 4];
      for (const Value *v : next->operands())
        __builtin_prefetch(v);
      if (next->numResults())
        __builtin_prefetch(next->result(0));
    }
    for (unsigned i = 0; i < n->numOperands(); ++i) {
      // `defined` holds this graph's values only, so a value found there is
      // from this graph; the producer is looked at only to say what is wrong.
      const Value *v = n->operand(i);
      if (defined.count(v))
        continue;
      if (&v->producer()->graph() != &g)
        return nodeError(*n, "operand " + llvm::Twine(i) + " comes from another graph");
      return nodeError(*n, "operand '" + printable(v->name()) + "' is used before it is defined");
    }
    auto types = inferResultTypes(*n);
    if (!types)
      return types.takeError();
    int expected = opInfo(n->op()).numOutputs;
    if ((expected >= 0 && n->numResults() != (unsigned)expected) ||
        types->size() != n->numResults())
      return nodeError(*n, "has " + llvm::Twine(n->numResults()) + " results, expected " +
                               llvm::Twine(types->size()));
    for (unsigned i = 0; i < n->numResults(); ++i) {
      if ((*types)[i] != n->result(i)->type())
        return nodeError(*n, "result '" + printable(n->result(i)->name()) + "' has type " +
                                 toString(n->result(i)->type()) + ", its operands give " +
                                 toString((*types)[i]));
      defined.insert(n->result(i));
    }
  }
  for (const Value *out : g.outputs())
    if (!defined.count(out))
      return makeError("graph '" + printable(g.name()) + "': output '" + printable(out->name()) +
                       "' is not defined");
  return llvm::Error::success();
}

llvm::Error verify(const Module &m) {
  if (auto e = checkModuleMeta(m.meta()))
    return e;
  for (const Variable &v : m.variables()) {
    if (!v.type.isStatic())
      return makeError("variable '" + printable(v.name) + "' has a symbolic shape " +
                       toString(v.type));
    if (!v.data.empty() && v.data.type() != v.type)
      return makeError("variable '" + printable(v.name) + "' is " + toString(v.type) +
                       " but its data is " + toString(v.data.type()));
  }
  for (const Graph *g : m.graphs())
    if (auto e = verifyGraph(*g))
      return withContext(std::move(e), "graph '" + printable(g->name()) + "'");
  return llvm::Error::success();
}

} // namespace graphc
