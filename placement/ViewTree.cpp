//===- ViewTree.cpp - Clusters from towers and scopes; device colours -------===//

#include "placement/ViewTree.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace graphc {
namespace {

struct Box {
  std::string label;
  bool isTower = false;
  int tower = -1;
  std::vector<std::unique_ptr<Box>> kids; ///< creation (first appearance) order
  llvm::StringMap<Box *> kidByKey;
  std::vector<const Node *> nodes;
  size_t total = 0;

  Box *kid(const std::string &key, const std::string &label, bool tower, int towerIndex) {
    auto [it, inserted] = kidByKey.try_emplace(key, nullptr);
    if (inserted) {
      kids.push_back(std::make_unique<Box>());
      kids.back()->label = label;
      kids.back()->isTower = tower;
      kids.back()->tower = towerIndex;
      it->second = kids.back().get();
    }
    return it->second;
  }
};

/// 3 for a scope named "tower_3" or "tower3", else -1.
int towerOfScope(llvm::StringRef scope) {
  if (!scope.consume_front("tower"))
    return -1;
  scope.consume_front("_");
  unsigned t = 0;
  if (scope.empty() || scope.getAsInteger(10, t))
    return -1;
  return (int)t;
}

/// The scopes of a node's name, outermost first; a Transfer's are its
/// producer's (a copy sits with the value it copies). A variable's name is dotted
/// ("Mixed_5b.branch1x1.conv.weight"): where a name component is a variable's,
/// its dots are scopes too, so a weight's read, copies and gradient land in the
/// box of the layer that uses it ("Mixed_5b/branch1x1/conv").
void scopesOf(const Node &n, llvm::SmallVectorImpl<llvm::StringRef> &out) {
  // A copy sits with the value it copies.
  if (n.op() == Op::Transfer)
    return scopesOf(*n.operand(0)->producer(), out);
  const Module &m = n.graph().module();
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::StringRef(n.name()).split(parts, '/');
  for (size_t i = 0; i < parts.size(); ++i) {
    bool leaf = i + 1 == parts.size();
    if (!parts[i].contains('.') || !m.findVariable(parts[i])) {
      if (!leaf)
        out.push_back(parts[i]);
      continue;
    }
    llvm::SmallVector<llvm::StringRef, 8> dotted;
    parts[i].split(dotted, '.');
    if (leaf)
      dotted.pop_back();
    out.append(dotted.begin(), dotted.end());
  }
}

/// Dissolves single-node scopes and merges scope chains, bottom up.
void simplify(Box &b, const llvm::DenseMap<const Node *, unsigned> &position) {
  for (auto &k : b.kids)
    simplify(*k, position);
  std::vector<std::unique_ptr<Box>> kept;
  bool moved = false;
  for (auto &k : b.kids) {
    if (!k->isTower && k->total == 1) {
      assert(k->nodes.size() == 1 && "nested single-node scopes dissolve first");
      b.nodes.push_back(k->nodes[0]);
      moved = true;
      continue;
    }
    while (!k->isTower && k->nodes.empty() && k->kids.size() == 1 && !k->kids[0]->isTower) {
      std::unique_ptr<Box> only = std::move(k->kids[0]);
      k->label += "/" + only->label;
      k->nodes = std::move(only->nodes);
      k->kids = std::move(only->kids);
    }
    kept.push_back(std::move(k));
  }
  b.kids = std::move(kept);
  b.kidByKey.clear();
  if (moved)
    llvm::sort(b.nodes, [&](const Node *x, const Node *y) {
      return position.lookup(x) < position.lookup(y);
    });
}

void countTotals(Box &b) {
  b.total = b.nodes.size();
  for (auto &k : b.kids) {
    countTotals(*k);
    b.total += k->total;
  }
}

/// Approximate hue/saturation/lightness to "#rrggbb".
std::string hslColor(double h, double s, double l) {
  auto channel = [&](double n) {
    double k = std::fmod(n + h / 30.0, 12.0);
    double a = s * std::min(l, 1 - l);
    double v = l - a * std::max(-1.0, std::min({k - 3, 9 - k, 1.0}));
    return (int)std::lround(v * 255);
  };
  char buf[8];
  snprintf(buf, sizeof(buf), "#%02x%02x%02x", channel(0), channel(8), channel(4));
  return buf;
}

} // namespace

ViewTree ViewTree::build(const Graph &g) {
  llvm::DenseMap<const Node *, unsigned> position;
  Box root;
  std::vector<std::pair<Box *, const Node *>> placed;
  for (const Node *n : g.nodes()) {
    position[n] = position.size();
    llvm::SmallVector<llvm::StringRef, 8> parts;
    scopesOf(*n, parts);
    Box *at = &root;
    size_t first = 0;
    int tower = n->tower();
    if (tower < 0 && !parts.empty())
      tower = towerOfScope(parts[0]);
    if (tower >= 0) {
      at = at->kid("\x01tower" + std::to_string(tower), "tower " + std::to_string(tower), true,
                   tower);
      if (!parts.empty() && towerOfScope(parts[0]) == tower)
        first = 1;
    }
    for (size_t i = first; i < parts.size(); ++i)
      at = at->kid(parts[i].str(), parts[i].str(), false, tower);
    at->nodes.push_back(n);
    placed.push_back({at, n});
  }
  // A node named like a scope ("b/conv" next to "b/conv/weight") opens that scope.
  for (auto [box, n] : placed) {
    llvm::StringRef leaf = llvm::StringRef(n->name()).rsplit('/').second;
    auto it = box->kidByKey.find(leaf.empty() ? n->name() : leaf);
    if (it == box->kidByKey.end() || it->second->isTower)
      continue;
    llvm::erase_value(box->nodes, n);
    auto &into = it->second->nodes;
    into.insert(llvm::upper_bound(into, n,
                                  [&](const Node *x, const Node *y) {
                                    return position.lookup(x) < position.lookup(y);
                                  }),
                n);
  }
  countTotals(root);
  simplify(root, position);
  countTotals(root);
  // Towers in tower order, in the slots towers took; scopes stay where they were.
  std::vector<size_t> slots;
  std::vector<std::unique_ptr<Box>> towers;
  for (size_t i = 0; i < root.kids.size(); ++i)
    if (root.kids[i]->isTower) {
      slots.push_back(i);
      towers.push_back(std::move(root.kids[i]));
    }
  llvm::stable_sort(towers, [](const auto &a, const auto &b) { return a->tower < b->tower; });
  for (size_t i = 0; i < slots.size(); ++i)
    root.kids[slots[i]] = std::move(towers[i]);

  ViewTree t;
  std::function<void(Box &, int)> flatten = [&](Box &b, int parent) {
    for (auto &k : b.kids) {
      unsigned index = t.clusters_.size();
      t.clusters_.push_back({k->label, parent, k->isTower, k->tower, {}, k->nodes, k->total});
      if (parent < 0)
        t.roots_.push_back(index);
      else
        t.clusters_[parent].children.push_back(index);
      for (const Node *n : k->nodes)
        t.clusterOf_[n] = index + 1;
      flatten(*k, index);
    }
  };
  flatten(root, -1);
  t.rootNodes_ = root.nodes;
  return t;
}

std::string deviceColor(std::optional<DeviceId> device) {
  if (!device)
    return "#ffffff";
  if (device->isHost())
    return "#d4d4d4";
  // Golden-angle steps keep neighbouring indices far apart in hue.
  double hue = std::fmod((device->isGpu() ? 205.0 : 35.0) + device->index * 137.508, 360.0);
  return device->isGpu() ? hslColor(hue, 0.70, 0.74) : hslColor(hue, 0.30, 0.78);
}

std::vector<DeviceId> devicesOf(const Module &m) {
  std::vector<DeviceId> ds;
  for (const Graph *g : m.graphs())
    for (const Node *n : g->nodes())
      if (n->assignedDevice())
        ds.push_back(*n->assignedDevice());
  llvm::sort(ds); // the host (cpu:0) first, then CPUs, then GPUs, by index
  ds.erase(std::unique(ds.begin(), ds.end()), ds.end());
  return ds;
}

} // namespace graphc
