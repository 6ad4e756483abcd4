//===- AccumulateGradients.cpp - The micro-step graph and the accumulators ---===//
//
// Stages:
//  1. Find the joins of main: every update (the sum over towers it reads, or
//     without towers its operand alone) and the loss output, each with its
//     per-tower parts.
//  2. Divide the cross-entropies' scale by K, then copy main into "micro".
//  3. Per join and part: an accumulator; in micro, the part added into it;
//     in main, the accumulator added to the part, and a reset to zero. State
//     updates with towers get the per-tower views instead (header, point 4).
//  4. Micro loses its joins, outputs and what only they needed.
//
//===----------------------------------------------------------------------===//

#include "passes/AccumulateGradients.h"

#include "passes/BasicPasses.h"

#include "ir/Builder.h"
#include "ir/Clone.h"
#include "ir/Diagnostics.h"
#include "passes/TowerReplication.h"

#include "llvm/ADT/DenseSet.h"

#include <cmath>

namespace graphc {

llvm::Expected<unsigned> parseAccumulateSteps(llvm::StringRef text) {
  unsigned k = 0;
  if (text.trim().getAsInteger(10, k) || k < 1 || k > (1u << 20))
    return makeError("--accumulate " + text +
                     ": must be a whole number of micro-batches per update, at least 1 (1: no "
                     "accumulation)");
  return k;
}

llvm::Expected<unsigned> accumulationSteps(const Module &m) {
  int64_t k = m.plan().accumulate.value_or(1);
  if (k < 1 || k > (1 << 20) || (k > 1) != (m.findGraph(kMicroGraph) != nullptr))
    return makeError("module '" + m.name() + "' is malformed: meta accumulate = " + llvm::Twine(k) +
                     (m.findGraph(kMicroGraph) ? " with" : " without") + " a graph '" +
                     kMicroGraph + "'");
  return (unsigned)k;
}

namespace {

enum class JoinKind { Gradient, State, Loss };

/// Where the towers' parts of one value meet.
struct Join {
  JoinKind kind;
  Node *update = nullptr; ///< Gradient, State: the variable update
  Node *sum = nullptr;    ///< the sum over towers; null without towers
  /// The parts to accumulate (an empty tower's zeros are left alone).
  llvm::SmallVector<Value *, 8> parts;
};

/// An untowered AddN whose operands all come from towers.
bool isTowerSum(const Node &n) {
  return n.op() == Op::AddN && n.tower() < 0 &&
         llvm::all_of(n.operands(), [](Value *v) { return v->producer()->tower() >= 0; });
}

Join joinOf(JoinKind kind, Node *update, Value *joined) {
  Join j{kind, update, nullptr, {}};
  if (isTowerSum(*joined->producer())) {
    j.sum = joined->producer();
    for (Value *v : j.sum->operands())
      if (v->producer()->op() != Op::Constant)
        j.parts.push_back(v);
  } else {
    j.parts.push_back(joined);
  }
  return j;
}

llvm::Expected<std::vector<Join>> findJoins(const Module &m, Graph &g, bool towers) {
  std::vector<Join> joins;
  for (Node *n : g.nodes()) {
    if (!isVariableUpdate(n->op()))
      continue;
    const Variable *v = m.findVariable(n->attrs().getString("var"));
    if (v && !v->persistent())
      return makeError("accumulate-gradients: the module already accumulates (node '" + n->name() +
                       "' writes accumulator '" + v->name + "')");
    Join j = joinOf(n->op() == Op::Assign ? JoinKind::State : JoinKind::Gradient, n, n->operand(0));
    if (towers && !j.sum)
      return nodeError(*n, "accumulate-gradients: the update does not read a sum over the "
                           "towers (run replicate-towers first, and accumulate-gradients before "
                           "aggregate-gradients)");
    joins.push_back(std::move(j));
  }
  if (joins.empty())
    return makeError("accumulate-gradients: graph '" + g.name() +
                     "' updates no variable; run add-optimizer first");
  if (g.outputs().empty() || g.outputs()[0]->type().rank() != 0)
    return makeError("accumulate-gradients: graph '" + g.name() +
                     "' must return the loss (a scalar) as output 0; run add-loss first");
  joins.push_back(joinOf(JoinKind::Loss, nullptr, g.outputs()[0]));
  return joins;
}

/// Divides every cross-entropy's scale (absent: 1/B) by K.
llvm::Error scaleLosses(Module &m, unsigned k) {
  bool found = false;
  const double batch = (double)m.batch().value_or(1);
  for (Node *n : m.main().nodes())
    if (n->op() == Op::SoftmaxCrossEntropy || n->op() == Op::SoftmaxCrossEntropyGrad) {
      n->attrs().set("scale", n->attrs().getFloat("scale", 1.0 / batch) / (double)k);
      found = true;
    }
  if (!found)
    return makeError("accumulate-gradients: no SoftmaxCrossEntropy in graph 'main' to scale by "
                     "1/K; run add-loss first");
  return llvm::Error::success();
}

/// The value whose sum over micro-steps a part needs: what feeds a
/// gradient's name (an Identity), else the part itself.
Value *accumuland(Value *part) {
  Node *p = part->producer();
  return p->op() == Op::Identity ? p->operand(0) : part;
}

/// Both graphs under rewrite: the accumulators, the nodes that use them, and
/// where those nodes go (next to where their values become ready).
struct Rewrite {
  Module &m;
  Graph &main, &micro;
  std::vector<std::pair<Node *, Node *>> mainMoves, microMoves;

  std::vector<std::pair<Node *, Node *>> &movesIn(const Graph &g) {
    return &g == &main ? mainMoves : microMoves;
  }

  /// A builder for graph `g` on `near`'s tower and requested device.
  static Builder builderAt(Graph &g, const Node &near) {
    Builder b(g);
    b.setTower(near.tower());
    b.setRequestedDevice(near.requestedDevice());
    return b;
  }

  /// An accumulator of `like`'s type for tower `tower`, named after `base`.
  llvm::Expected<std::string> accumulator(llvm::StringRef base, const Value &like, int tower) {
    std::string name =
        (tower >= 0 ? towerPrefix(tower) : std::string()) + "accumulated/" + base.str();
    if (m.findVariable(name))
      return makeError("accumulate-gradients: cannot create accumulator '" + name +
                       "': a variable of that name exists");
    Variable v;
    v.name = name;
    v.type = like.type();
    v.kind = VarKind::Accumulator;
    v.init = {"zeros", {}};
    if (tower >= 0)
      v.devices = {like.producer()->requestedDevice().value_or(towerDevice(tower))};
    m.addVariable(std::move(v));
    return name;
  }

  /// acc + x in x's graph, right after x is computed.
  Value *sum(const std::string &acc, Value *x) {
    Graph &g = x->producer()->graph();
    Builder b = builderAt(g, *x->producer());
    Value *read = b.variable(acc);
    Value *total = b.create(Op::Add, {read, x}, {}, acc + "/add");
    movesIn(g).push_back({read->producer(), x->producer()});
    movesIn(g).push_back({total->producer(), read->producer()});
    return total;
  }

  /// Micro: acc = acc + x.
  void addInto(const std::string &acc, Value *x) {
    Value *total = sum(acc, x);
    Attrs a;
    a.set("var", acc);
    Node *assign = builderAt(micro, *x->producer())
                       .createNode(Op::Assign, {total}, std::move(a), acc + "/accumulate");
    microMoves.push_back({assign, total->producer()});
  }

  /// Main: acc + x, then acc = 0.
  Value *addFrom(const std::string &acc, Value *x) {
    Value *total = sum(acc, x);
    reset(*x->producer(), acc, x->type());
    return total;
  }

  /// Main: acc = 0, by `near`'s device (appended: the executor's schedule
  /// puts a variable's writes after its reads).
  void reset(const Node &near, const std::string &acc, const TensorType &t) {
    Builder b = builderAt(main, near);
    Value *scalar = b.constant(Tensor(TensorType(t.dtype, {})), acc + "/zero");
    Attrs shape;
    shape.set("shape", Ints(t.shape.begin(), t.shape.end()));
    Value *zeros = b.create(Op::Expand, {scalar}, std::move(shape), acc + "/zeros");
    Attrs a;
    a.set("var", acc);
    b.createNode(Op::Assign, {zeros}, std::move(a), acc + "/reset");
  }

  /// `read` (a Variable node) + acc in place of `read` for all its users.
  void view(Node *read, const std::string &acc) {
    Graph &g = read->graph();
    Builder b = builderAt(g, *read);
    Value *delta = b.variable(acc);
    Value *sum = b.create(Op::Add, {read->result(), delta}, {}, acc + "/view");
    read->result()->replaceAllUsesWith(sum);
    sum->producer()->setOperand(0, read->result());
    movesIn(g).push_back({delta->producer(), read});
    movesIn(g).push_back({sum->producer(), delta->producer()});
  }

  void finish() {
    main.moveAfter(mainMoves);
    micro.moveAfter(microMoves);
  }
};

/// The counterpart of a main value in micro (same names).
Value *inMicro(Graph &micro, const Value *v) {
  Value *c = micro.findValue(v->name());
  assert(c && "micro is a copy of main");
  return c;
}

/// Gradients and the loss: accumulated per part (header, points 2 and 3).
llvm::Error accumulateParts(const Join &j, Rewrite &r) {
  for (Value *part : j.parts) {
    Value *x = accumuland(part);
    auto acc = r.accumulator(stripTowerPrefix(part->name()), *x, part->producer()->tower());
    if (!acc)
      return acc.takeError();
    r.addInto(*acc, inMicro(r.micro, x));
    Value *sum = r.addFrom(*acc, x);
    if (x != part) {
      part->producer()->setOperand(0, sum);
    } else if (j.sum) {
      for (unsigned i = 0; i < j.sum->numOperands(); ++i)
        if (j.sum->operand(i) == part)
          j.sum->setOperand(i, sum);
    } else if (j.update) {
      j.update->setOperand(0, sum);
    } else {
      llvm::SmallVector<Value *, 4> outputs(r.main.outputs().begin(), r.main.outputs().end());
      outputs[0] = sum;
      r.main.setOutputs(outputs);
    }
  }
  return llvm::Error::success();
}

/// Tower t's value before its batch-share weighting (TowerReplication.h,
/// point 6): the part itself at weight 1, else the Mul's other operand.
llvm::Expected<Value *> unweighted(Value *part, double weight, const Node &update) {
  if (weight == 1.0)
    return part;
  Node *mul = part->producer();
  if (mul->op() == Op::Mul)
    for (unsigned i = 0; i < 2; ++i) {
      Node *c = mul->operand(i)->producer();
      if (c->op() == Op::Constant && c->result()->type().rank() == 0 &&
          std::abs(c->attrs().getTensor("value")->at(0) - weight) <= 1e-6 * weight)
        return mul->operand(1 - i);
    }
  return nodeError(update, "accumulate-gradients: tower " + llvm::Twine(part->producer()->tower()) +
                               "'s part '" + part->name() +
                               "' is not its value weighted by its share of the batch");
}

/// State updates with towers: the per-tower views (header, point 4).
llvm::Error accumulateState(const Join &j, Rewrite &r, llvm::ArrayRef<int64_t> towerBatches) {
  const std::string var = j.update->attrs().getString("var");
  int64_t global = 0;
  for (int64_t b : towerBatches)
    global += b;
  for (Value *part : j.parts) {
    const int tower = part->producer()->tower();
    llvm::SmallVector<Node *, 2> reads; // tower t's reads of the variable in main
    for (Node *n : r.main.nodes())
      if (n->op() == Op::Variable && n->tower() == tower && n->attrs().getString("var") == var)
        reads.push_back(n);
    if (reads.empty())
      continue; // the tower's value does not depend on the variable: the last one stands
    auto next = unweighted(part, (double)towerBatches[tower] / (double)global, *j.update);
    if (!next)
      return next.takeError();
    auto acc = r.accumulator(var, *reads.front()->result(), tower);
    if (!acc)
      return acc.takeError();
    // Both graphs read the view v + acc wherever the tower read v.
    for (Node *read : reads) {
      r.view(r.micro.findNode(read->name()), *acc);
      r.view(read, *acc);
    }
    // Micro: acc = next - v (next computed from the view).
    Value *microRead = r.micro.findNode(reads.front()->name())->result();
    Value *value = inMicro(r.micro, *next);
    Builder b = Rewrite::builderAt(r.micro, *value->producer());
    Value *change = b.create(Op::Sub, {value, microRead}, {}, *acc + "/change");
    Attrs a;
    a.set("var", *acc);
    b.createNode(Op::Assign, {change}, std::move(a), *acc + "/accumulate");
    // Main: v = the towers' weighted next values from their views; acc = 0.
    r.reset(*part->producer(), *acc, reads.front()->result()->type());
  }
  return llvm::Error::success();
}

/// Removes what micro does not run: joins, outputs, and what only they read.
void pruneMicro(Graph &micro, const llvm::DenseSet<const Node *> &joins) {
  micro.setOutputs({});
  std::vector<const Node *> roots;
  for (Node *n : micro.nodes())
    if (!joins.count(n) && (isVariableUpdate(n->op()) || n->op() == Op::AllReduce))
      roots.push_back(n);
  keepWhatRootsNeed(micro, roots);
}

} // namespace

llvm::Expected<bool> accumulateGradients(Module &m, const AccumulateOptions &opts) {
  if (opts.steps < 1)
    return makeError("accumulate-gradients: --accumulate " + llvm::Twine(opts.steps) +
                     ": must be at least 1");
  if (opts.steps == 1)
    return false;
  Graph *main = m.findGraph("main");
  if (!main)
    return makeError("accumulate-gradients: the module has no graph 'main'");
  if (m.findGraph(kMicroGraph) || m.plan().accumulate)
    return makeError("accumulate-gradients: the module already accumulates (graph '" + kMicroGraph +
                     "')");
  const bool towers = m.plan().towerBatches.has_value();
  for (const Node *n : main->nodes())
    if (n->op() == Op::Input && n->tower() >= 0)
      return nodeError(*n, "accumulate-gradients: the towers read their own data inputs; run "
                           "split-batch and concat-outputs first");
  auto joins = findJoins(m, *main, towers);
  if (!joins)
    return joins.takeError();
  if (auto e = scaleLosses(m, opts.steps))
    return e;

  Graph &micro = m.addGraph(kMicroGraph.str());
  cloneGraphInto(*main, micro);
  Rewrite rewrite{m, *main, micro, {}, {}};
  std::vector<int64_t> towerBatches;
  if (towers) {
    auto b = graphc::towerBatches(m, "accumulate-gradients");
    if (!b)
      return b.takeError();
    towerBatches = std::move(*b);
  }
  llvm::DenseSet<const Node *> microJoins;
  for (const Join &j : *joins) {
    if (j.kind == JoinKind::State && !j.sum)
      continue; // no towers: the same Assign in both graphs
    if (j.update)
      microJoins.insert(micro.findNode(j.update->name()));
    llvm::Error e = j.kind == JoinKind::State ? accumulateState(j, rewrite, towerBatches)
                                              : accumulateParts(j, rewrite);
    if (e)
      return e;
  }
  rewrite.finish();
  pruneMicro(micro, microJoins);
  for (Graph *g : {main, &micro})
    if (!g->sortTopologically())
      return makeError("accumulate-gradients: graph '" + g->name() + "' has a cycle");
  m.plan().accumulate = (int64_t)opts.steps;
  return true;
}

} // namespace graphc
