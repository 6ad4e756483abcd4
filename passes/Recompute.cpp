//===- Recompute.cpp - The rewrite of dropped activations into copies -----===//

#include "passes/Recompute.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"

namespace graphc {

llvm::DenseSet<const Node *> backwardNodes(const Graph &g) {
  llvm::DenseSet<const Node *> back;
  // The node order is topological: one pass sees every producer first.
  for (const Node *n : g.nodes())
    if (n->op() == Op::SoftmaxCrossEntropyGrad ||
        llvm::any_of(n->operands(), [&](const Value *v) { return back.contains(v->producer()); }))
      back.insert(n);
  return back;
}

RecomputeAnalysis::RecomputeAnalysis(const Graph &g) : backward_(backwardNodes(g)) {
  outputs_.insert(g.outputs().begin(), g.outputs().end());
}

bool RecomputeAnalysis::isSaved(const Value *v) const {
  return llvm::any_of(v->users(), [&](const Node *u) { return backward_.contains(u); });
}

/// A node that computes its results from its operands alone, the same way
/// each time it runs.
static bool computesFromOperands(const Node &n) {
  switch (n.op()) {
  case Op::Input:
  case Op::Variable:
  case Op::Constant:
  case Op::SplitBatch:
  case Op::ConcatBatch:
  case Op::CheckFinite:
    return false;
  default:
    return n.numResults() > 0 && !isCommunication(n.op()) && !isVariableUpdate(n.op());
  }
}

bool RecomputeAnalysis::mayCopy(const Node *n, const Node *reader) const {
  return computesFromOperands(*n) && !backward_.contains(n) &&
         n->assignedDevice() == reader->assignedDevice();
}

bool RecomputeAnalysis::isKept(const Value *v, const Node *reader,
                               const llvm::DenseSet<const Value *> &dropped) const {
  if (dropped.contains(v))
    return false;
  return isSaved(v) || outputs_.contains(v) || !mayCopy(v->producer(), reader);
}

void RecomputeAnalysis::closure(const Value *v, const llvm::DenseSet<const Value *> &dropped,
                                llvm::DenseSet<const Node *> &seen,
                                std::vector<const Node *> &out) const {
  const Node *n = v->producer();
  if (!seen.insert(n).second)
    return;
  for (const Value *o : n->operands())
    if (!isKept(o, n, dropped))
      closure(o, dropped, seen, out);
  out.push_back(n);
}

std::vector<Value *> droppableValues(const Graph &g, const RecomputeAnalysis &analysis) {
  std::vector<Value *> out;
  for (const Node *n : g.nodes()) {
    if (analysis.isBackward(n) || !analysis.mayCopy(n, n))
      continue;
    for (const auto &r : n->results()) {
      bool local = llvm::all_of(
          r->users(), [&](const Node *u) { return u->assignedDevice() == n->assignedDevice(); });
      if (local && analysis.isSaved(r.get()) && !analysis.isOutput(r.get()))
        out.push_back(r.get());
    }
  }
  return out;
}

namespace {

/// The copies of one rewrite and where they stand.
class Recomputation {
public:
  Recomputation(Graph &g, llvm::ArrayRef<Value *> dropped)
      : g_(g), analysis_(g), dropped_(dropped.begin(), dropped.end()) {}

  std::vector<Node *> run(llvm::ArrayRef<Value *> dropped) {
    for (Value *v : dropped) {
      assert(analysis_.isSaved(v) && "recompute: a dropped value is read by the backward pass");
      Node *copy = copyOf(v->producer());
      llvm::SmallVector<Node *, 4> readers(v->users().begin(), v->users().end());
      for (Node *u : readers)
        if (analysis_.isBackward(u))
          for (unsigned i = 0; i < u->numOperands(); ++i)
            if (u->operand(i) == v)
              u->setOperand(i, copy->result(v->resultIndex()));
    }
    placeCopies();
    return copies_;
  }

private:
  Node *copyOf(Node *n) {
    if (Node *done = copy_.lookup(n))
      return done;
    llvm::SmallVector<Value *, 4> operands;
    for (Value *o : n->operands())
      operands.push_back(
          analysis_.isKept(o, n, dropped_) ? o : copyOf(o->producer())->result(o->resultIndex()));
    llvm::SmallVector<TensorType, 3> types;
    for (const auto &r : n->results())
      types.push_back(r->type());
    Attrs attrs = n->attrs();
    attrs.set(kRecomputeOf, n->name());
    Node *c = g_.createNode(n->op(), operands, types, std::move(attrs),
                            g_.uniqueName(n->name() + "/recompute"));
    c->copyPlacementFrom(*n, /*assigned=*/true);
    if (n->assignedDevice())
      c->setPlacementReason("recomputed for the backward pass (--recompute)");
    copy_[n] = c;
    copies_.push_back(c);
    return c;
  }

  /// Rule 3: each copy just before its first reader.
  void placeCopies() {
    llvm::DenseMap<const Node *, unsigned> position;
    std::vector<Node *> originals;
    for (Node *n : g_.nodes())
      if (!isRecomputed(*n)) {
        position[n] = originals.size();
        originals.push_back(n);
      }
    llvm::DenseMap<const Node *, unsigned> anchor;
    const unsigned end = originals.size();
    // Copies are made operands first, so readers are settled first in reverse.
    for (Node *c : llvm::reverse(copies_)) {
      unsigned first = end;
      for (const auto &r : c->results())
        for (const Node *u : r->users())
          first = std::min(first, isRecomputed(*u) ? anchor.lookup(u) : position.lookup(u));
      anchor[c] = first;
    }
    std::vector<std::vector<Node *>> before(end + 1);
    for (Node *c : copies_)
      before[anchor[c]].push_back(c);
    std::vector<Node *> order;
    for (unsigned i = 0; i <= end; ++i) {
      llvm::append_range(order, before[i]);
      if (i < end)
        order.push_back(originals[i]);
    }
    g_.reorder(order);
    bool sorted = g_.sortTopologically();
    assert(sorted && "recompute: copies cannot form a cycle");
    (void)sorted;
  }

  Graph &g_;
  RecomputeAnalysis analysis_;
  llvm::DenseSet<const Value *> dropped_;
  llvm::DenseMap<const Node *, Node *> copy_;
  std::vector<Node *> copies_;
};

} // namespace

std::vector<Node *> recomputeValues(Graph &g, llvm::ArrayRef<Value *> dropped) {
  if (dropped.empty())
    return {};
  return Recomputation(g, dropped).run(dropped);
}

llvm::Expected<bool> recompute(Module &m, const RecomputeOptions &opts) {
  if (opts.mode == RecomputeMode::Off)
    return false;
  auto names = chooseRecompute(m, opts);
  if (!names)
    return names.takeError();
  if (names->empty())
    return false;
  Graph &g = m.main();
  std::vector<Value *> dropped;
  for (const std::string &name : *names)
    dropped.push_back(g.findValue(name));
  recomputeValues(g, dropped);
  return true;
}

} // namespace graphc
