#include "passes/InferenceFusion.h"

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace graphc {

unsigned fuseReluInto(Module &m, llvm::ArrayRef<Op> into) {
  unsigned fused = 0;
  for (Graph *g : m.graphs()) {
    llvm::SmallVector<Node *, 64> relus;
    for (Node *n : g->nodes()) {
      if (n->op() != Op::Relu)
        continue;
      Value *x = n->operand(0);
      Node *p = x->producer();
      if (!llvm::is_contained(into, p->op()) || x != p->result(0) || p->attrs().has("activation") ||
          x->users().size() != 1 || llvm::is_contained(g->outputs(), x))
        continue;
      relus.push_back(n);
    }
    for (Node *relu : relus) {
      Node *p = relu->operand(0)->producer();
      p->attrs().set("activation", std::string("relu"));
      relu->result()->replaceAllUsesWith(p->result(0));
      g->erase(relu);
      ++fused;
    }
  }
  return fused;
}

unsigned fuseConvRelu(Module &m) {
  return fuseReluInto(m, {Op::Conv});
}

/// The Conv operand of `add` that can take the other as its fused addend:
/// a Conv without post-ops whose result only this Add reads, beside an
/// addend of the sum's own type; of two, the later one (its addend is
/// computed first).
static std::optional<unsigned> fusibleConvOperand(const Graph &g, const Node &add,
                                                  const llvm::DenseMap<const Node *, size_t> &at) {
  std::optional<unsigned> best;
  for (unsigned k = 0; k < 2; ++k) {
    const Value *v = add.operand(k);
    const Node *conv = v->producer();
    if (conv->op() != Op::Conv || conv->attrs().has("activation") || conv->attrs().has("sum") ||
        v->users().size() != 1 || llvm::is_contained(g.outputs(), v) ||
        v->type() != add.result()->type() || add.operand(1 - k)->type() != v->type())
      continue;
    if (!best || at.lookup(conv) > at.lookup(add.operand(*best)->producer()))
      best = k;
  }
  return best;
}

unsigned fuseConvAdd(Module &m) {
  unsigned fused = 0;
  for (Graph *g : m.graphs()) {
    llvm::DenseMap<const Node *, size_t> at;
    for (Node *n : g->nodes())
      at[n] = at.size();
    llvm::SmallVector<std::pair<Node *, unsigned>, 16> adds;
    for (Node *n : g->nodes())
      if (n->op() == Op::Add)
        if (auto k = fusibleConvOperand(*g, *n, at))
          adds.push_back({n, *k});
    for (auto &[add, k] : adds) {
      Node *conv = add->operand(k)->producer();
      llvm::SmallVector<Value *, 4> operands(conv->operands().begin(), conv->operands().end());
      operands.push_back(add->operand(1 - k));
      conv->setOperands(operands);
      conv->attrs().set("sum", (int64_t)1);
      add->result()->replaceAllUsesWith(conv->result());
      g->erase(add);
      ++fused;
    }
    // An addend made after its convolution now comes before it.
    if (!adds.empty())
      g->sortTopologically();
  }
  return fused;
}

/// The pool's [top, left, bottom, right] with `pad`'s spatial pads added, if
/// `pad` (rank 4, constant zero, nothing on N and C) can be folded into it.
static std::optional<Ints> foldedPads(const Node &pad, const Node &pool) {
  const Attrs &p = pad.attrs(), &q = pool.attrs();
  Ints pads = p.getInts("pads");
  if (p.getString("mode", "constant") != "constant" || p.getFloat("value", 0.0) != 0.0 ||
      pads.size() != 8 || pads[0] || pads[1] || pads[4] || pads[5] ||
      llvm::any_of(pads, [](int64_t v) { return v < 0; }) || q.getInt("ceil_mode", 0) != 0)
    return std::nullopt;
  Ints have = q.has("pads") ? q.getInts("pads") : Ints{0, 0, 0, 0};
  // Pool pads that were not counted cannot be merged with counted ones.
  if (have.size() != 4 || (q.getInt("count_include_pad", 0) == 0 &&
                           llvm::any_of(have, [](int64_t v) { return v != 0; })))
    return std::nullopt;
  return Ints{have[0] + pads[2], have[1] + pads[3], have[2] + pads[6], have[3] + pads[7]};
}

unsigned fusePadIntoAveragePool(Module &m) {
  unsigned fused = 0;
  for (Graph *g : m.graphs()) {
    llvm::SmallVector<std::pair<Node *, Ints>, 16> pools;
    for (Node *n : g->nodes()) {
      if (n->op() != Op::AveragePool)
        continue;
      Value *x = n->operand(0);
      Node *pad = x->producer();
      if (pad->op() != Op::Pad || x->users().size() != 1 || llvm::is_contained(g->outputs(), x))
        continue;
      if (auto pads = foldedPads(*pad, *n))
        pools.push_back({n, *pads});
    }
    for (auto &[pool, pads] : pools) {
      Node *pad = pool->operand(0)->producer();
      pool->setOperand(0, pad->operand(0));
      pool->attrs().set("pads", pads);
      pool->attrs().set("count_include_pad", (int64_t)1);
      g->erase(pad);
      ++fused;
    }
  }
  return fused;
}

} // namespace graphc
