#include "ir/Module.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

#include <cassert>
#include <queue>

namespace graphc {

//===-- Value / Node ------------------------------------------------------===//

llvm::Error nodeError(const Node &n, const llvm::Twine &msg) {
  return makeError("node '" + printable(n.name(), 256) + "' (" + opName(n.op()) + "): " + msg);
}

void Value::replaceAllUsesWith(Value *other) {
  assert(other != this);
  // Copy: setOperand edits users_.
  llvm::SmallVector<Node *, 4> users(users_.begin(), users_.end());
  for (Node *u : llvm::make_early_inc_range(users))
    for (unsigned i = 0; i < u->numOperands(); ++i)
      if (u->operand(i) == this)
        u->setOperand(i, other);
  Graph &g = producer_->graph();
  llvm::SmallVector<Value *, 4> outs(g.outputs().begin(), g.outputs().end());
  bool changed = false;
  for (Value *&o : outs)
    if (o == this) {
      o = other;
      changed = true;
    }
  if (changed)
    g.setOutputs(outs);
}

void Value::dropUse(Node *user) {
  auto it = llvm::find(users_, user);
  assert(it != users_.end() && "use list out of sync");
  users_.erase(it);
}

void Node::setOperand(unsigned i, Value *v) {
  operands_[i]->dropUse(this);
  operands_[i] = v;
  v->users_.push_back(this);
}

void Node::addOperand(Value *v) {
  operands_.push_back(v);
  v->users_.push_back(this);
}

void Node::setOperands(llvm::ArrayRef<Value *> vs) {
  dropOperands();
  for (Value *v : vs)
    addOperand(v);
}

void Node::dropOperands() {
  for (Value *v : operands_)
    v->dropUse(this);
  operands_.clear();
}

void Node::copyPlacementFrom(const Node &o, bool assigned) {
  tower_ = o.tower_;
  requested_ = o.requested_;
  if (assigned) {
    assigned_ = o.assigned_;
    reason_ = o.reason_;
  }
}

//===-- Graph -------------------------------------------------------------===//

Node *Graph::createNode(Op op, llvm::ArrayRef<Value *> operands,
                        llvm::ArrayRef<TensorType> resultTypes, Attrs attrs, llvm::StringRef name) {
  std::vector<std::string> names;
  for (size_t i = 0; i < resultTypes.size(); ++i)
    names.push_back(resultTypes.size() == 1 ? name.str() : (name + ":" + llvm::Twine(i)).str());
  return createNodeWithResultNames(op, operands, resultTypes, names, std::move(attrs), name);
}

Node *Graph::createNodeWithResultNames(Op op, llvm::ArrayRef<Value *> operands,
                                       llvm::ArrayRef<TensorType> resultTypes,
                                       llvm::ArrayRef<std::string> resultNames, Attrs attrs,
                                       llvm::StringRef name) {
  assert(resultTypes.size() == resultNames.size());
  std::unique_ptr<Node> n(new Node(this, op, name.str()));
  n->attrs_ = std::move(attrs);
  for (Value *v : operands)
    n->addOperand(v);
  Named &entry = names_[n->name_];
  assert(!entry.node && "node names must be unique");
  entry.node = n.get();
  for (size_t i = 0; i < resultTypes.size(); ++i) {
    n->results_.emplace_back(new Value(n.get(), i, resultNames[i], resultTypes[i]));
    // Entries stay where they are when the table grows.
    Named &e = resultNames[i] == n->name_ ? entry : names_[resultNames[i]];
    assert(!e.value && "value names must be unique");
    e.value = n->results_.back().get();
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().get();
}

void Graph::erase(Node *n) {
  auto at = llvm::find_if(nodes_, [n](const std::unique_ptr<Node> &p) { return p.get() == n; });
  assert(at != nodes_.end() && "erasing a node of another graph");
  n->dropOperands();
  forgetNames(n);
  nodes_.erase(at);
}

void Graph::forgetNames(Node *n) {
  auto forget = [&](llvm::StringRef name, bool node) {
    auto it = names_.find(name);
    assert(it != names_.end() && "name table out of sync");
    if (node)
      it->second.node = nullptr;
    else
      it->second.value = nullptr;
    if (!it->second.node && !it->second.value)
      names_.erase(it);
  };
  for (auto &r : n->results_) {
    assert(!r->hasUsers() && "erasing a node whose results are still used");
    assert(!llvm::is_contained(outputs_, r.get()) && "erasing a graph output");
    if (r->name() == n->name() && n->numResults() == 1) {
      names_.erase(r->name()); // the node's entry, and only its
      return;
    }
    forget(r->name(), /*node=*/false);
  }
  forget(n->name(), /*node=*/true);
}

void Graph::eraseIf(llvm::function_ref<bool(const Node &)> pred) {
  // One pass to find them, one to drop their uses and names, one to compact
  // the node list: linear in the graph, however many nodes go.
  std::vector<bool> doomed(nodes_.size());
  bool any = false;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (pred(*nodes_[i]))
      doomed[i] = any = true;
  if (!any)
    return;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (doomed[i])
      nodes_[i]->dropOperands();
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (doomed[i])
      forgetNames(nodes_[i].get());
  size_t kept = 0;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (!doomed[i])
      nodes_[kept++] = std::move(nodes_[i]);
  nodes_.resize(kept);
}

std::vector<Node *> Graph::inputs() const {
  std::vector<Node *> ins;
  for (auto &n : nodes_)
    if (n->op() == Op::Input)
      ins.push_back(n.get());
  return ins;
}

Node *Graph::findInput(llvm::StringRef name) const {
  Node *n = findNode(name);
  return n && n->op() == Op::Input ? n : nullptr;
}

Node *Graph::findNode(llvm::StringRef name) const {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : it->second.node;
}

Value *Graph::findValue(llvm::StringRef name) const {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : it->second.value;
}

std::string Graph::uniqueName(llvm::StringRef base) const {
  // An entry exists only while a node or a value has the name.
  if (!names_.count(base))
    return base.str();
  for (unsigned i = 1;; ++i) {
    std::string candidate = (base + "_" + llvm::Twine(i)).str();
    if (!names_.count(candidate))
      return candidate;
  }
}

void Graph::rename(Node *n, llvm::StringRef name) {
  assert(!findNode(name) && "node names must be unique");
  bool withResult = n->numResults() == 1 && n->result()->name_ == n->name_;
  assert((!withResult || !findValue(name)) && "value names must be unique");
  auto old = names_.find(n->name_);
  assert(old != names_.end() && old->second.node == n && "name table out of sync");
  old->second.node = nullptr;
  if (withResult)
    old->second.value = nullptr;
  if (!old->second.value)
    names_.erase(old);
  Named &entry = names_[name];
  entry.node = n;
  if (withResult) {
    n->result()->name_ = name.str();
    entry.value = n->result();
  }
  n->name_ = name.str();
}

void Graph::moveAfter(Node *n, Node *anchor) {
  auto from = llvm::find_if(nodes_, [&](const std::unique_ptr<Node> &p) { return p.get() == n; });
  assert(from != nodes_.end());
  std::unique_ptr<Node> owned = std::move(*from);
  nodes_.erase(from);
  auto at =
      llvm::find_if(nodes_, [&](const std::unique_ptr<Node> &p) { return p.get() == anchor; });
  assert(at != nodes_.end());
  nodes_.insert(at + 1, std::move(owned));
}

void Graph::reorder(llvm::ArrayRef<Node *> order) {
  assert(order.size() == nodes_.size() && "reorder: a permutation of the nodes");
  llvm::DenseMap<const Node *, unsigned> at;
  for (unsigned i = 0; i < order.size(); ++i)
    at[order[i]] = i;
  std::vector<std::unique_ptr<Node>> sorted(nodes_.size());
  for (std::unique_ptr<Node> &n : nodes_) {
    auto it = at.find(n.get());
    assert(it != at.end() && !sorted[it->second] && "reorder: a permutation of the nodes");
    sorted[it->second] = std::move(n);
  }
  nodes_ = std::move(sorted);
}

void Graph::moveAfter(llvm::ArrayRef<std::pair<Node *, Node *>> moves) {
  if (moves.empty())
    return;
  llvm::DenseMap<const Node *, llvm::SmallVector<Node *, 2>> followers;
  llvm::DenseSet<const Node *> moved;
  for (auto [n, anchor] : moves) {
    assert(n != anchor);
    followers[anchor].push_back(n);
    bool once = moved.insert(n).second;
    (void)once;
    assert(once && "moveAfter: a node moves once");
  }
  // The new order as plain pointers; the owning list is rewritten at the end.
  std::vector<Node *> order;
  order.reserve(nodes_.size());
  // Each unmoved node, then its followers (and theirs) depth-first.
  std::vector<Node *> stack;
  for (const std::unique_ptr<Node> &p : nodes_) {
    if (moved.contains(p.get())) // a follower: comes with its anchor
      continue;
    stack.push_back(p.get());
    while (!stack.empty()) {
      Node *n = stack.back();
      stack.pop_back();
      order.push_back(n);
      auto it = followers.find(n);
      if (it != followers.end())
        for (Node *f : llvm::reverse(it->second))
          stack.push_back(f);
    }
  }
  assert(order.size() == nodes_.size() && "moveAfter: anchors form a cycle");
  if (order.size() != nodes_.size()) { // only after a cycle: keep every node
    llvm::DenseSet<const Node *> placed(order.begin(), order.end());
    for (const std::unique_ptr<Node> &p : nodes_)
      if (!placed.contains(p.get()))
        order.push_back(p.get());
  }
  for (std::unique_ptr<Node> &p : nodes_)
    (void)p.release();
  for (size_t i = 0; i < order.size(); ++i)
    nodes_[i].reset(order[i]);
}

bool Graph::sortTopologically() {
  const unsigned count = nodes_.size();
  llvm::DenseMap<const Node *, unsigned> position;
  position.reserve(count);
  for (unsigned i = 0; i < count; ++i)
    position[nodes_[i].get()] = i;
  // Most graphs come here in order already; then the stable sort below would
  // give back the same order, so a check is enough.
  auto inOrder = [&] {
    for (unsigned i = 0; i < count; ++i)
      for (const Value *v : nodes_[i]->operands()) {
        auto it = position.find(v->producer());
        if (it == position.end() || it->second >= i)
          return false;
      }
    return true;
  };
  if (inOrder())
    return true;

  // Kahn's algorithm with a min-heap on the current position: stable.
  std::vector<unsigned> pending(count);
  std::priority_queue<unsigned, std::vector<unsigned>, std::greater<>> ready;
  for (unsigned i = 0; i < count; ++i) {
    pending[i] = nodes_[i]->numOperands();
    if (pending[i] == 0)
      ready.push(i);
  }
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(count);
  while (!ready.empty()) {
    unsigned i = ready.top();
    ready.pop();
    Node *n = nodes_[i].get();
    for (auto &r : n->results())
      for (Node *u : r->users()) {
        auto it = position.find(u);
        if (it != position.end() && --pending[it->second] == 0)
          ready.push(it->second);
      }
    sorted.push_back(std::move(nodes_[i]));
  }
  if (sorted.size() != nodes_.size()) {
    // Put the unsorted rest back so the graph stays whole.
    for (auto &n : nodes_)
      if (n)
        sorted.push_back(std::move(n));
    nodes_ = std::move(sorted);
    return false;
  }
  nodes_ = std::move(sorted);
  return true;
}

//===-- Module ------------------------------------------------------------===//

int64_t Variable::bytesOn(DeviceId d) const {
  auto it = llvm::find(devices, d);
  if (it == devices.end())
    return 0;
  if (!sharded)
    return type.bytes();
  ShardRange piece = shardRange(type.numElements(), it - devices.begin(), devices.size());
  return piece.size() * (int64_t)dtypeSize(type.dtype);
}

llvm::StringRef varKindName(VarKind k) {
  switch (k) {
  case VarKind::Param:
    return "param";
  case VarKind::State:
    return "state";
  case VarKind::Slot:
    return "slot";
  case VarKind::Accumulator:
    return "accumulator";
  }
  return "param";
}

std::optional<VarKind> parseVarKind(llvm::StringRef s) {
  for (VarKind k : {VarKind::Param, VarKind::State, VarKind::Slot, VarKind::Accumulator})
    if (varKindName(k) == s)
      return k;
  return std::nullopt;
}

Variable &Module::addVariable(Variable v) {
  assert(!variableIndex_.count(v.name) && "variable names must be unique");
  variableIndex_[v.name] = variables_.size();
  variables_.push_back(std::move(v));
  return variables_.back();
}

Variable *Module::findVariable(llvm::StringRef name) {
  auto it = variableIndex_.find(name);
  return it == variableIndex_.end() ? nullptr : &variables_[it->second];
}

const Variable *Module::findVariable(llvm::StringRef name) const {
  auto it = variableIndex_.find(name);
  return it == variableIndex_.end() ? nullptr : &variables_[it->second];
}

void Module::removeVariable(llvm::StringRef name) {
  llvm::erase_if(variables_, [&](const Variable &v) { return v.name == name; });
  reindexVariables();
}

void Module::removeUnusedVariables() {
  llvm::StringSet<> used;
  if (const Graph *g = findGraph("main"))
    for (const Node *n : g->nodes())
      if (n->op() == Op::Variable || isVariableUpdate(n->op())) {
        used.insert(n->attrs().getString("var"));
        for (const std::string &s : n->attrs().getStrings("slots"))
          used.insert(s);
      }
  llvm::erase_if(variables_, [&](const Variable &v) { return !used.contains(v.name); });
  reindexVariables();
}

void Module::reindexVariables() {
  variableIndex_.clear();
  for (size_t i = 0; i < variables_.size(); ++i)
    variableIndex_[variables_[i].name] = i;
}

Graph &Module::addGraph(std::string name) {
  assert(!findGraph(name) && "graph names must be unique");
  graphs_.push_back(std::make_unique<Graph>(*this, std::move(name)));
  return *graphs_.back();
}

void Module::removeGraph(llvm::StringRef name) {
  llvm::erase_if(graphs_, [&](const std::unique_ptr<Graph> &g) { return g->name() == name; });
}

Graph *Module::findGraph(llvm::StringRef name) const {
  for (auto &g : graphs_)
    if (g->name() == name)
      return g.get();
  return nullptr;
}

Graph &Module::main() {
  if (Graph *g = findGraph("main"))
    return *g;
  return addGraph("main");
}

std::vector<Graph *> Module::graphs() const {
  std::vector<Graph *> gs;
  for (auto &g : graphs_)
    gs.push_back(g.get());
  return gs;
}

} // namespace graphc
