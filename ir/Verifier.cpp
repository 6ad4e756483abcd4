#include "ir/Verifier.h"

#include "ir/Diagnostics.h"
#include "ir/Initializers.h"
#include "ir/OpAttrs.h"
#include "ir/ShapeInference.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <thread>

namespace graphc {

/// Node `n`'s result types against its shape function (which checks its
/// arity and attributes too).
static llvm::Error checkTypes(const Node &n) {
  auto types = inferResultTypes(n);
  if (!types)
    return types.takeError();
  int expected = opInfo(n.op()).numOutputs;
  if ((expected >= 0 && n.numResults() != (unsigned)expected) || types->size() != n.numResults())
    return nodeError(n, "has " + llvm::Twine(n.numResults()) + " results, expected " +
                            llvm::Twine(types->size()));
  for (unsigned i = 0; i < n.numResults(); ++i)
    if ((*types)[i] != n.result(i)->type())
      return nodeError(n, "result '" + printable(n.result(i)->name()) + "' has type " +
                              toString(n.result(i)->type()) + ", its operands give " +
                              toString((*types)[i]));
  return llvm::Error::success();
}

/// The first node of `nodes` whose types are wrong: its index (or the size)
/// and the error. The walk waits on memory more than it computes, so it
/// fetches the nodes a few steps ahead and the values the next ones read and
/// define.
static size_t firstBadTypes(llvm::ArrayRef<const Node *> nodes, llvm::Error &error) {
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (k + 8 < nodes.size())
      __builtin_prefetch(nodes[k + 8]);
    if (k + 4 < nodes.size()) {
      const Node *next = nodes[k + 4];
      for (const Value *v : next->operands())
        __builtin_prefetch(v);
      if (next->numResults())
        __builtin_prefetch(next->result(0));
    }
    if (llvm::Error e = checkTypes(*nodes[k])) {
      error = std::move(e);
      return k;
    }
  }
  return nodes.size();
}

/// Nodes per thread below which a graph is checked on one thread.
static constexpr size_t kNodesPerThread = 4096;

static llvm::Error verifyGraph(const Graph &g) {
  std::vector<const Node *> nodes(g.nodes().begin(), g.nodes().end());
  // Types are a question about each node alone: on a large graph the
  // threads the machine has answer it for slices of the nodes while this
  // thread checks the order. The first error in graph order is reported
  // either way (a node's operands before its types), so the answer does not
  // depend on the threads.
  size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()),
                                    nodes.size() / kNodesPerThread);
  size_t slice = threads > 1 ? (nodes.size() + threads - 1) / threads : nodes.size();
  std::vector<size_t> badTypes(threads > 1 ? threads : 1, SIZE_MAX);
  std::vector<llvm::Error> typeErrors;
  for (size_t t = 0; t < badTypes.size(); ++t)
    typeErrors.push_back(llvm::Error::success());
  auto checkSlice = [&](size_t t) {
    size_t begin = std::min(nodes.size(), t * slice), end = std::min(nodes.size(), begin + slice);
    size_t at =
        firstBadTypes(llvm::ArrayRef<const Node *>(nodes).slice(begin, end - begin), typeErrors[t]);
    badTypes[t] = at < end - begin ? begin + at : SIZE_MAX;
  };
  std::vector<std::thread> workers;
  for (size_t t = 1; t < badTypes.size(); ++t)
    workers.emplace_back(checkSlice, t);

  // Order: every operand defined earlier in this graph. `defined` holds this
  // graph's values only, so a value found there is from this graph; the
  // producer is looked at only to say what is wrong.
  size_t badOrder = SIZE_MAX;
  llvm::Error orderError = llvm::Error::success();
  llvm::DenseSet<const Value *> defined;
  defined.reserve(nodes.size() + nodes.size() / 4);
  for (size_t k = 0; k < nodes.size() && badOrder == SIZE_MAX; ++k) {
    const Node *n = nodes[k];
    if (k + 8 < nodes.size())
      __builtin_prefetch(nodes[k + 8]);
    for (unsigned i = 0; i < n->numOperands(); ++i) {
      const Value *v = n->operand(i);
      if (defined.count(v))
        continue;
      badOrder = k;
      if (&v->producer()->graph() != &g)
        orderError = nodeError(*n, "operand " + llvm::Twine(i) + " comes from another graph");
      else
        orderError =
            nodeError(*n, "operand '" + printable(v->name()) + "' is used before it is defined");
      break;
    }
    for (unsigned i = 0; i < n->numResults(); ++i)
      defined.insert(n->result(i));
  }
  checkSlice(0);
  for (std::thread &w : workers)
    w.join();

  // The first failure in graph order; the others are dropped.
  size_t first = std::min(badOrder, *std::min_element(badTypes.begin(), badTypes.end()));
  llvm::Error result = llvm::Error::success();
  if (first != SIZE_MAX && badOrder == first)
    result = std::move(orderError);
  else
    llvm::consumeError(std::move(orderError));
  for (size_t t = 0; t < badTypes.size(); ++t) {
    if (first != SIZE_MAX && badTypes[t] == first && !result)
      result = std::move(typeErrors[t]);
    else
      llvm::consumeError(std::move(typeErrors[t]));
  }
  if (result)
    return result;
  for (const Value *out : g.outputs())
    if (!defined.count(out))
      return makeError("graph '" + printable(g.name()) + "': output '" + printable(out->name()) +
                       "' is not defined");
  return llvm::Error::success();
}

llvm::Error verify(const Module &m) {
  if (auto e = checkPlanInfo(m.plan()))
    return e;
  for (const Variable &v : m.variables()) {
    if (!v.type.isStatic())
      return makeError("variable '" + printable(v.name) + "' has a symbolic shape " +
                       toString(v.type));
    if (!v.data.empty() && v.data.type() != v.type)
      return makeError("variable '" + printable(v.name) + "' is " + toString(v.type) +
                       " but its data is " + toString(v.data.type()));
    // Elided data is a dump's, fine to inspect; the executor refuses it.
    if (v.data.empty() && v.init.fn != "elided")
      if (auto e = checkInitializer(v))
        return e;
  }
  for (const Graph *g : m.graphs())
    if (auto e = verifyGraph(*g))
      return withContext(std::move(e), "graph '" + printable(g->name()) + "'");
  return llvm::Error::success();
}

} // namespace graphc
