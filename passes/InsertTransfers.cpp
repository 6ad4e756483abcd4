//===- InsertTransfers.cpp - One copy per value and destination device ------===//

#include "passes/InsertTransfers.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"

#include <map>

namespace graphc {

bool crossesDevicesByDesign(const Value &v, const Node &reader) {
  return isCommunication(reader.op()) || isCollective(v.producer()->op());
}

static std::string nameSafe(llvm::StringRef s) {
  std::string out = s.str();
  std::replace(out.begin(), out.end(), ':', '_');
  return out;
}

static llvm::Expected<bool> insertTransfers(Graph &g) {
  for (const Node *n : g.nodes())
    if (!n->assignedDevice())
      return nodeError(*n, "has no assigned device; run place-devices before insert-transfers");

  // (value, destination) -> Transfer; existing ones first (rule 2).
  std::map<std::pair<const Value *, DeviceId>, Node *> existing;
  for (Node *n : g.nodes())
    if (n->op() == Op::Transfer)
      existing.try_emplace({n->operand(0), *n->assignedDevice()}, n);

  struct Crossing {
    Value *value;
    DeviceId to;
    std::vector<std::pair<Node *, unsigned>> readers; ///< (node, operand slot)
  };
  std::vector<Crossing> crossings; // first-read order: deterministic
  std::map<std::pair<const Value *, DeviceId>, unsigned> crossingIndex;
  for (Node *n : g.nodes())
    for (unsigned i = 0; i < n->numOperands(); ++i) {
      Value *v = n->operand(i);
      DeviceId from = *v->producer()->assignedDevice(), to = *n->assignedDevice();
      if (from == to || crossesDevicesByDesign(*v, *n))
        continue;
      auto key = std::make_pair((const Value *)v, to);
      auto [it, inserted] = crossingIndex.try_emplace(key, crossings.size());
      if (inserted)
        crossings.push_back({v, to, {}});
      crossings[it->second].readers.emplace_back(n, i);
    }

  bool changed = false;
  Builder b(g);
  // Copies of one value follow each other after its producer in creation order.
  std::vector<std::pair<Node *, Node *>> moves;
  // A reused Transfer may sit after a reader it gains; the stable sort below
  // restores topological order without moving anything that was in order.
  for (Crossing &c : crossings) {
    Node *producer = c.value->producer();
    auto it = existing.find({c.value, c.to});
    Node *t = it == existing.end() ? nullptr : it->second;
    if (!t) {
      int tower = c.readers.front().first->tower();
      for (auto &[reader, slot] : c.readers)
        if (reader->tower() != tower)
          tower = -1;
      Attrs a;
      const std::string from = producer->assignedDevice()->str(), to = c.to.str();
      a.set("from", from);
      a.set("to", to);
      b.setTower(tower);
      b.setRequestedDevice(c.to);
      t = b.createNode(Op::Transfer, {c.value}, std::move(a),
                       nameSafe(c.value->name()) + "/to_" + nameSafe(to));
      t->setAssignedDevice(c.to);
      t->setPlacementReason("transfer from " + from);
      moves.emplace_back(t, producer);
    }
    for (auto &[reader, slot] : c.readers)
      reader->setOperand(slot, t->result());
    changed = true;
  }
  g.moveAfter(moves);
  if (changed && !g.sortTopologically())
    return makeError("insert-transfers: graph '" + g.name() + "' has a cycle");
  return changed;
}

llvm::Expected<bool> insertTransfers(Module &m) {
  bool changed = false;
  for (Graph *g : m.graphs()) {
    auto c = insertTransfers(*g);
    if (!c)
      return c.takeError();
    changed |= *c;
  }
  return changed;
}

} // namespace graphc
