//===- ColocationGroups.cpp - Union-find over nodes and variable storage ----===//

#include "placement/ColocationGroups.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

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

std::string joinDevices(const std::vector<std::string> &ds) {
  return llvm::join(ds, ", ");
}

} // namespace

llvm::Expected<unsigned> replicaOf(const Node &n, const Variable &var) {
  const std::vector<std::string> &ds = var.devices;
  if (ds.size() <= 1)
    return 0;
  if (!n.requestedDevice().empty()) {
    auto it = llvm::find(ds, n.requestedDevice());
    if (it == ds.end())
      return nodeError(n, "requests device '" + n.requestedDevice() + "', but variable '" +
                              var.name + "' has replicas only on " + joinDevices(ds));
    return unsigned(it - ds.begin());
  }
  if (n.tower() >= 0 && (size_t)n.tower() < ds.size())
    return (unsigned)n.tower();
  return nodeError(n, "uses variable '" + var.name + "', which has a replica on each of " +
                          joinDevices(ds) +
                          ", but neither a requested device nor a tower says which replica");
}

llvm::Expected<ColocationGroups> ColocationGroups::build(const Graph &g) {
  const Module &m = g.module();
  std::vector<const Node *> nodes(g.nodes().begin(), g.nodes().end());
  UnionFind uf;
  ColocationGroups out;
  for (unsigned i = 0; i < nodes.size(); ++i) {
    uf.add();
    out.position_[nodes[i]] = i;
  }

  // Storage elements come after the nodes, created in first-use order.
  std::vector<VariableReplica> replicas;
  llvm::StringMap<unsigned> replicaElement;
  auto storageElement = [&](const std::string &var, unsigned replica) {
    std::string key = var + "#" + std::to_string(replica);
    auto [it, inserted] = replicaElement.try_emplace(key, 0);
    if (inserted) {
      it->second = uf.add();
      replicas.push_back({var, replica});
    }
    return it->second;
  };

  // Reasons are recorded per union and gathered per group afterwards.
  std::vector<std::pair<unsigned, std::string>> unions;
  for (unsigned i = 0; i < nodes.size(); ++i) {
    const Node &n = *nodes[i];
    bool readsOrWrites = n.op() == Op::Variable || isVariableUpdate(n.op());
    if (readsOrWrites) {
      std::string name = n.attrs().getString("var");
      const Variable *v = m.findVariable(name);
      if (!v)
        return nodeError(n, "uses unknown variable '" + name + "'");
      auto r = replicaOf(n, *v);
      if (!r)
        return r.takeError();
      if (uf.join(i, storageElement(name, *r)))
        unions.emplace_back(i, "reads or writes variable '" + name + "'");
      for (const std::string &slot : n.attrs().getStrings("slots")) {
        const Variable *s = m.findVariable(slot);
        if (!s)
          return nodeError(n, "uses unknown optimizer slot '" + slot + "'");
        if (!s->devices.empty() && s->devices.size() != std::max<size_t>(1, v->devices.size()))
          return nodeError(n, "optimizer slot '" + slot + "' has " +
                                  llvm::Twine(s->devices.size()) +
                                  " storage devices, its variable '" + name + "' has " +
                                  llvm::Twine(v->devices.size()));
        if (uf.join(i, storageElement(slot, *r)))
          unions.emplace_back(i, "updates optimizer slot '" + slot + "'");
      }
    }
    if (n.attrs().has("colocate_with")) {
      std::string target = n.attrs().getString("colocate_with");
      Node *t = g.findNode(target);
      if (!t)
        return nodeError(n, "colocate_with names '" + target + "', which is not a node of graph '" +
                                g.name() + "'");
      if (uf.join(i, out.position_.lookup(t)))
        unions.emplace_back(i, "colocate_with '" + target + "'");
    }
  }

  // Number groups by root; roots come in element order, so groups are
  // numbered by their first member in graph order.
  llvm::DenseMap<unsigned, unsigned> groupOfRoot;
  auto groupOf = [&](unsigned element) {
    auto [it, inserted] = groupOfRoot.try_emplace(uf.find(element), out.members_.size());
    if (inserted) {
      out.members_.emplace_back();
      out.storage_.emplace_back();
      out.why_.emplace_back();
    }
    return it->second;
  };
  for (unsigned i = 0; i < nodes.size(); ++i) {
    unsigned gi = groupOf(i);
    out.groupOfNode_[nodes[i]] = gi;
    out.members_[gi].push_back(nodes[i]);
  }
  for (unsigned k = 0; k < replicas.size(); ++k)
    out.storage_[groupOf(nodes.size() + k)].push_back(replicas[k]);
  for (auto &[element, why] : unions)
    out.why_[groupOf(element)].push_back("'" + nodes[element]->name() + "' " + why);
  return out;
}

} // namespace graphc
