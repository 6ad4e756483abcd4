//===- Autodiff.cpp - The reverse sweep -------------------------------------===//
//
// Stages:
//  1. Mark what matters: values that depend on a trainable variable through
//     floating-point values (forward), and nodes the loss depends on
//     (backward). A node is differentiated when both hold.
//  2. Seed the loss with 1.0 and walk the forward nodes in reverse order. A
//     value's gradient is the sum (AddN) of the contributions of its readers;
//     reverse topological order guarantees every reader has contributed before
//     the value's producer asks for it.
//  3. For each trainable variable, sum the contributions over all its reads
//     and publish the total as `grad/<var>` (Identity, grad_of = var).
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/Autodiff.h"

#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "passes/autodiff/GradRule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace graphc {

bool hasGradientRule(Op op) {
  return GradRegistry::global().kind(op) != GradRegistry::Kind::Missing;
}

namespace {

bool isTrainableRead(const Node &n) {
  if (n.op() != Op::Variable)
    return false;
  const Variable *v = n.graph().module().findVariable(n.attrs().getString("var"));
  return v && v->trainable() && isDifferentiable(v->type.dtype);
}

class ReverseSweep {
public:
  ReverseSweep(Graph &g) : g_(g), b_(g) {}
  llvm::Error run();

private:
  void markDependencies();
  /// The summed gradient of `v`, or null when it has none.
  Value *totalGradient(Value *v);
  llvm::Error differentiateNode(Node &n);
  llvm::Error publishVariableGradients();

  Graph &g_;
  Builder b_;
  std::vector<Node *> forward_;
  llvm::DenseSet<const Value *> dependsOnParam_;
  llvm::DenseSet<const Node *> feedsLoss_;
  /// Contributions to each value's gradient, in the order they were made.
  llvm::DenseMap<const Value *, llvm::SmallVector<Value *, 2>> contributions_;
};

void ReverseSweep::markDependencies() {
  for (Node *n : forward_) {
    bool depends = isTrainableRead(*n) ||
                   llvm::any_of(n->operands(), [&](Value *v) { return dependsOnParam_.count(v); });
    if (!depends)
      continue;
    for (auto &r : n->results())
      if (isDifferentiable(r->type().dtype))
        dependsOnParam_.insert(r.get());
  }
  llvm::SmallVector<const Node *, 64> work{g_.outputs()[0]->producer()};
  while (!work.empty()) {
    const Node *n = work.pop_back_val();
    if (!feedsLoss_.insert(n).second)
      continue;
    for (Value *v : n->operands())
      work.push_back(v->producer());
  }
}

Value *ReverseSweep::totalGradient(Value *v) {
  auto it = contributions_.find(v);
  if (it == contributions_.end() || it->second.empty())
    return nullptr;
  if (it->second.size() == 1)
    return it->second.front();
  Builder::Scope scope(b_, v->producer()->name());
  return b_.create(Op::AddN, it->second, {}, "sum");
}

llvm::Error ReverseSweep::differentiateNode(Node &n) {
  const GradRegistry &reg = GradRegistry::global();
  b_.setTower(n.tower());
  b_.setRequestedDevice(n.requestedDevice());
  llvm::SmallVector<Value *, 2> dys;
  bool any = false;
  for (auto &r : n.results()) {
    dys.push_back(totalGradient(r.get()));
    any |= dys.back() != nullptr;
  }
  if (!any)
    return llvm::Error::success();
  switch (reg.kind(n.op())) {
  case GradRegistry::Kind::NoGradient:
    return llvm::Error::success();
  case GradRegistry::Kind::Missing:
    return nodeError(n, "no gradient rule for op '" + opName(n.op()) +
                            "'; it lies between a trainable variable and the loss");
  case GradRegistry::Kind::Rule:
    break;
  }
  llvm::SmallVector<bool, 4> needs;
  for (Value *v : n.operands())
    needs.push_back(dependsOnParam_.count(v) != 0);
  Builder::Scope scope(b_, n.name());
  GradContext ctx(n, b_, dys, needs);
  if (auto e = reg.rule(n.op())(ctx))
    return e;
  for (unsigned i = 0; i < n.numOperands(); ++i) {
    Value *g = ctx.grads()[i];
    if (!g || !needs[i])
      continue;
    if (g->type() != n.operand(i)->type())
      return nodeError(n, "gradient rule produced " + toString(g->type()) + " for operand " +
                              llvm::Twine(i) + " of type " + toString(n.operand(i)->type()));
    contributions_[n.operand(i)].push_back(g);
  }
  return llvm::Error::success();
}

llvm::Error ReverseSweep::publishVariableGradients() {
  Module &m = g_.module();
  // Module order, then read order: deterministic.
  for (const Variable &var : m.variables()) {
    if (!var.trainable())
      continue;
    llvm::SmallVector<Value *, 2> parts;
    for (Node *n : forward_)
      if (n->op() == Op::Variable && n->attrs().getString("var") == var.name)
        if (auto it = contributions_.find(n->result()); it != contributions_.end())
          parts.append(it->second.begin(), it->second.end());
    if (parts.empty())
      continue;
    std::string name = "grad/" + var.name;
    // A gradient node of some forward node may have taken the name.
    if (Node *taken = g_.findNode(name))
      g_.rename(taken, g_.uniqueName(name + "_"));
    b_.setTower(-1);
    b_.setRequestedDevice(std::nullopt);
    Value *total = parts.front();
    if (parts.size() > 1) {
      Builder::Scope scope(b_, name);
      total = b_.create(Op::AddN, parts, {}, "sum");
    }
    Attrs a;
    a.set("grad_of", var.name);
    b_.create(Op::Identity, {total}, std::move(a), name);
  }
  return llvm::Error::success();
}

llvm::Error ReverseSweep::run() {
  if (g_.outputs().empty())
    return makeError("autodiff: graph '" + g_.name() + "' has no output to differentiate");
  Value *loss = g_.outputs()[0];
  if (loss->type().rank() != 0 || !isDifferentiable(loss->type().dtype))
    return makeError("autodiff: graph output 0 '" + loss->name() + "' must be a scalar float " +
                     "loss (run add-loss first), got " + toString(loss->type()));
  forward_.assign(g_.nodes().begin(), g_.nodes().end());
  markDependencies();
  if (!dependsOnParam_.count(loss))
    return makeError("autodiff: the loss '" + loss->name() +
                     "' does not depend on any trainable variable");

  Value *seed;
  {
    Builder::Scope scope(b_, "grad");
    seed = scalarConstant(b_, 1.0, loss->type().dtype, "seed");
  }
  contributions_[loss].push_back(seed);
  {
    Builder::Scope scope(b_, "grad");
    for (Node *n : llvm::reverse(forward_)) {
      if (n->op() == Op::Variable || !feedsLoss_.count(n) ||
          llvm::none_of(n->results(), [&](auto &r) { return dependsOnParam_.count(r.get()); }))
        continue;
      if (auto e = differentiateNode(*n))
        return e;
    }
  }
  return publishVariableGradients();
}

} // namespace

llvm::Expected<bool> differentiate(Module &m) {
  Graph *g = m.findGraph("main");
  if (!g)
    return makeError("autodiff: the module has no graph 'main'");
  ReverseSweep sweep(*g);
  if (auto e = sweep.run())
    return e;
  return true;
}

} // namespace graphc
