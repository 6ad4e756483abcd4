//===- SplitBatch.cpp - split-batch, concat-outputs ----------------------===//

#include "passes/SplitBatch.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "passes/TowerReplication.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"

#include <map>
#include <numeric>

namespace graphc {
namespace {

/// Groups keyed by name, in first-seen order.
template <typename V>
using NamedGroups = llvm::MapVector<std::string, V, std::map<std::string, unsigned>>;

/// The node whose result `v` is, named without its tower prefix.
std::string untoweredName(const Value *v) {
  return stripTowerPrefix(v->name()).str();
}

} // namespace

llvm::Expected<bool> splitBatch(Module &m) {
  Graph *g = m.findGraph("main");
  if (!g || !m.plan().towerBatches)
    return false;
  auto sizes = towerBatches(m, "split-batch");
  if (!sizes)
    return sizes.takeError();
  int64_t global = std::accumulate(sizes->begin(), sizes->end(), int64_t(0));

  NamedGroups<llvm::SmallVector<Node *, 8>> groups;
  for (Node *n : g->nodes()) {
    if (n->op() != Op::Input || n->tower() < 0)
      continue;
    int tower = -1;
    llvm::StringRef name = stripTowerPrefix(n->name(), &tower);
    const TensorType &t = n->result()->type();
    if (tower != n->tower() || tower >= (int)sizes->size() || t.rank() < 1 ||
        t.shape[0] != (*sizes)[tower])
      return nodeError(*n,
                       "split-batch: a tower input must be named tower_<t>/<name> by its "
                       "tower t and hold that tower's batch of " +
                           llvm::Twine(tower >= 0 && tower < (int)sizes->size() ? (*sizes)[tower]
                                                                                : int64_t(-1)));
    groups[name.str()].push_back(n);
  }
  Node *anchor = nullptr; // the global inputs go first, in the order of their groups
  for (auto &[name, members] : groups) {
    if (g->findNode(name))
      return nodeError(*g->findNode(name), "split-batch: the name is needed for the global input "
                                           "of the towers' '" +
                                               members.front()->name() + "'");
    TensorType t = members.front()->result()->type();
    t.shape[0] = global;
    Builder b(*g);
    b.setRequestedDevice(DeviceId::host());
    Value *in = b.input(name, t);
    Attrs a;
    a.set("sizes", Ints(sizes->begin(), sizes->end()));
    Node *split = b.createNode(Op::SplitBatch, {in}, std::move(a), name + "/split");
    if (anchor) {
      g->moveAfter(in->producer(), anchor);
    } else if (Node *front = *g->nodes().begin(); front != in->producer()) {
      g->moveAfter(in->producer(), front);
      g->moveAfter(front, in->producer());
    }
    g->moveAfter(split, in->producer());
    anchor = split;
    for (Node *member : members) {
      member->result()->replaceAllUsesWith(split->result(member->tower()));
      g->erase(member);
    }
  }
  return !groups.empty();
}

llvm::Expected<bool> concatOutputs(Module &m) {
  Graph *g = m.findGraph("main");
  if (!g || !m.plan().towerBatches)
    return false;
  auto sizes = towerBatches(m, "concat-outputs");
  if (!sizes)
    return sizes.takeError();
  unsigned nonEmpty = llvm::count_if(*sizes, [](int64_t s) { return s > 0; });

  // Untowered outputs stay; towered ones gather under their untowered name.
  NamedGroups<llvm::SmallVector<Value *, 8>> groups;
  for (Value *v : g->outputs())
    groups[v->producer()->tower() < 0 ? v->name() : untoweredName(v)].push_back(v);
  bool changed = false;
  llvm::SmallVector<Value *, 4> outputs;
  Builder b(*g);
  b.setRequestedDevice(DeviceId::host());
  for (auto &[name, parts] : groups) {
    if (parts.front()->producer()->tower() < 0) {
      outputs.append(parts.begin(), parts.end());
      continue;
    }
    if (parts.size() != nonEmpty)
      return makeError("concat-outputs: output '" + name + "' comes from " +
                       llvm::Twine(parts.size()) + " towers, expected one from each of the " +
                       llvm::Twine(nonEmpty) + " non-empty towers");
    bool scalar = parts.front()->type().rank() == 0;
    for (Value *p : parts) {
      int tower = p->producer()->tower();
      if (!scalar && (p->type().rank() == 0 || p->type().shape[0] != (*sizes)[tower]))
        return nodeError(*p->producer(),
                         "concat-outputs: output '" + p->name() + "' " + toString(p->type()) +
                             " is neither a scalar to sum nor batched along its first dimension "
                             "(tower " +
                             llvm::Twine(tower) + " holds " + llvm::Twine((*sizes)[tower]) +
                             " samples)");
    }
    outputs.push_back(b.create(scalar ? Op::AddN : Op::ConcatBatch, parts, {}, name));
    changed = true;
  }
  g->setOutputs(outputs);
  return changed;
}

} // namespace graphc
