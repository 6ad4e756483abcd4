//===- ColocationGroups.cpp - Union-find over nodes and variable storage ----===//

#include "placement/ColocationGroups.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {
namespace {

/// Union-find whose root is always the smallest element, so a group's root is
/// its first member in graph order.
class UnionFind {
public:
  unsigned add() {
    parent_.push_back(parent_.size());
    return parent_.size() - 1;
  }
  unsigned find(unsigned x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  /// True if x and y were in different sets.
  bool join(unsigned x, unsigned y) {
    x = find(x);
    y = find(y);
    if (x == y)
      return false;
    if (y < x)
      std::swap(x, y);
    parent_[y] = x;
    return true;
  }

private:
  std::vector<unsigned> parent_;
};

} // namespace

llvm::Expected<unsigned> replicaOf(const Node &n, const Variable &var) {
  const std::vector<DeviceId> &ds = var.devices;
  if (ds.size() <= 1)
    return 0;
  if (std::optional<DeviceId> requested = n.requestedDevice()) {
    auto it = llvm::find(ds, *requested);
    if (it == ds.end())
      return nodeError(n, "requests device '" + requested->str() + "', but variable '" + var.name +
                              "' has replicas only on " + joinDevices(ds));
    return unsigned(it - ds.begin());
  }
  if (n.tower() >= 0 && (size_t)n.tower() < ds.size())
    return (unsigned)n.tower();
  return nodeError(n, "uses variable '" + var.name + "', which has a replica on each of " +
                          joinDevices(ds) +
                          ", but neither a requested device nor a tower says which replica");
}

namespace {

/// The string attribute `name`, read in place; null when absent.
const std::string *stringAttr(const Node &n, llvm::StringRef name) {
  const Attribute *a = n.attrs().find(name);
  return a ? std::get_if<std::string>(a) : nullptr;
}

/// The node's optimizer slots, read in place.
llvm::ArrayRef<std::string> slotsOf(const Node &n) {
  const Attribute *a = n.attrs().find("slots");
  const Strings *slots = a ? std::get_if<Strings>(a) : nullptr;
  return slots ? llvm::ArrayRef<std::string>(*slots) : llvm::ArrayRef<std::string>();
}

} // namespace

llvm::Expected<ColocationGroups> ColocationGroups::build(const Graph &g) {
  const Module &m = g.module();
  ColocationGroups out;
  std::vector<const Node *> &nodes = out.nodes_;
  nodes.assign(g.nodes().begin(), g.nodes().end());
  UnionFind uf;
  out.nodeInfo_.reserve(nodes.size());
  for (unsigned i = 0; i < nodes.size(); ++i) {
    uf.add();
    out.nodeInfo_[nodes[i]].position = i;
  }

  // Storage elements come after the nodes, created in first-use order. A
  // variable is one entry of the module, so its address names it.
  std::vector<VariableReplica> replicas;
  llvm::DenseMap<std::pair<const Variable *, unsigned>, unsigned> replicaElement;
  auto storageElement = [&](const Variable &var, unsigned replica) {
    auto [it, inserted] = replicaElement.try_emplace({&var, replica}, 0);
    if (inserted) {
      it->second = uf.add();
      replicas.push_back({var.name, replica});
    }
    return it->second;
  };

  static const std::string kNoName;
  for (unsigned i = 0; i < nodes.size(); ++i) {
    const Node &n = *nodes[i];
    bool readsOrWrites = n.op() == Op::Variable || isVariableUpdate(n.op());
    if (readsOrWrites) {
      const std::string *var = stringAttr(n, "var");
      const std::string &name = var ? *var : kNoName;
      const Variable *v = m.findVariable(name);
      if (!v)
        return nodeError(n, "uses unknown variable '" + name + "'");
      auto r = replicaOf(n, *v);
      if (!r)
        return r.takeError();
      if (uf.join(i, storageElement(*v, *r)))
        out.unions_.push_back({Union::Variable, i, 0, 0});
      llvm::ArrayRef<std::string> slots = slotsOf(n);
      for (unsigned k = 0; k < slots.size(); ++k) {
        const std::string &slot = slots[k];
        const Variable *s = m.findVariable(slot);
        if (!s)
          return nodeError(n, "uses unknown optimizer slot '" + slot + "'");
        if (!s->devices.empty() && s->devices.size() != std::max<size_t>(1, v->devices.size()))
          return nodeError(n, "optimizer slot '" + slot + "' has " +
                                  llvm::Twine(s->devices.size()) +
                                  " storage devices, its variable '" + name + "' has " +
                                  llvm::Twine(v->devices.size()));
        if (uf.join(i, storageElement(*s, *r)))
          out.unions_.push_back({Union::Slot, i, 0, k});
      }
    }
    if (const Attribute *a = n.attrs().find("colocate_with")) {
      const std::string *named = std::get_if<std::string>(a);
      const std::string &target = named ? *named : kNoName;
      Node *t = g.findNode(target);
      if (!t)
        return nodeError(n, "colocate_with names '" + target + "', which is not a node of graph '" +
                                g.name() + "'");
      if (uf.join(i, out.nodeInfo_.lookup(t).position))
        out.unions_.push_back({Union::ColocateWith, i, 0, 0});
    }
  }

  // Number groups by root; roots come in element order, so groups are
  // numbered by their first member in graph order.
  const unsigned elements = nodes.size() + replicas.size();
  std::vector<unsigned> groupOfRoot(elements, ~0u);
  unsigned groups = 0;
  auto groupOf = [&](unsigned element) {
    unsigned &group = groupOfRoot[uf.find(element)];
    if (group == ~0u)
      group = groups++;
    return group;
  };
  out.groupByPosition_.resize(nodes.size());
  for (unsigned i = 0; i < nodes.size(); ++i) {
    unsigned gi = groupOf(i);
    out.groupByPosition_[i] = gi;
    out.nodeInfo_[nodes[i]].group = gi;
  }
  std::vector<unsigned> storageGroup(replicas.size());
  for (unsigned k = 0; k < replicas.size(); ++k)
    storageGroup[k] = groupOf(nodes.size() + k);
  for (Union &u : out.unions_)
    u.group = groupOf(u.element);

  // Members and storage listed group after group, each in element order.
  auto bucket = [&](llvm::ArrayRef<unsigned> groupOfItem, std::vector<unsigned> &start) {
    start.assign(groups + 1, 0);
    for (unsigned gi : groupOfItem)
      ++start[gi + 1];
    for (unsigned gi = 0; gi < groups; ++gi)
      start[gi + 1] += start[gi];
    std::vector<unsigned> slot(start.begin(), start.end() - 1), order(groupOfItem.size());
    for (unsigned i = 0; i < groupOfItem.size(); ++i)
      order[slot[groupOfItem[i]]++] = i;
    return order;
  };
  for (unsigned i : bucket(out.groupByPosition_, out.memberStart_))
    out.members_.push_back(nodes[i]);
  for (unsigned k : bucket(storageGroup, out.storageStart_))
    out.storage_.push_back(std::move(replicas[k]));
  return out;
}

std::vector<std::string> ColocationGroups::why(unsigned group) const {
  std::vector<std::string> lines;
  for (const Union &u : unions_) {
    if (u.group != group)
      continue;
    const Node &n = *nodes_[u.element];
    const std::string *var = stringAttr(n, "var");
    std::string line = "'" + n.name() + "' ";
    switch (u.kind) {
    case Union::Variable:
      line += "reads or writes variable '" + (var ? *var : std::string()) + "'";
      break;
    case Union::Slot:
      line += "updates optimizer slot '" + slotsOf(n)[u.slot] + "'";
      break;
    case Union::ColocateWith: {
      const std::string *target = stringAttr(n, "colocate_with");
      line += "colocate_with '" + (target ? *target : std::string()) + "'";
      break;
    }
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

} // namespace graphc
