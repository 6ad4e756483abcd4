//===- ViewTree.h - Towers and name scopes as nested boxes ------*- C++ -*-===//
//
// What the DOT and HTML views draw: a graph's nodes grouped into clusters,
// towers at the top ("tower 1", for nodes whose Node::tower() is 1, whatever
// their name) and name scopes below ("Mixed_5b/branch1x1/conv" sits in
// Mixed_5b > branch1x1). A leading "tower_1" (or "tower1") scope is the tower
// itself, not a scope inside it; a node outside every tower whose name starts
// with one (a copy of tower 1's result to the host) is drawn in that tower's
// box, where its name puts it. Towers come in tower order. A name component
// that is a variable's dotted name ("Mixed_5b.branch1x1.conv.weight") counts
// its dots as scopes, so a weight's read, its copies and its gradient sit in
// the box of the layer that uses it (a node named like a scope, "b/conv" next
// to "b/conv/weight", opens that scope). A Transfer is drawn with the value it
// copies. To keep boxes meaningful, a scope
// holding a single node is dissolved into its parent, and a scope whose only
// content is one other scope is merged with it ("Mixed_5b/branch1x1").
//
// Clusters are listed parents first, children in the order their first node
// appears in the graph; nothing depends on pointer values. Device colours are
// shared by both views so a device looks the same everywhere.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"

namespace graphc {

struct ViewCluster {
  std::string label; ///< "tower 1", "Mixed_5b", merged chains "a/b"
  int parent = -1;   ///< index into ViewTree::clusters(); -1: top level
  bool isTower = false;
  int tower = -1;                  ///< the tower this cluster is (in), -1 for none
  std::vector<unsigned> children;  ///< cluster indices
  std::vector<const Node *> nodes; ///< direct members, graph order
  size_t totalNodes = 0;           ///< members at any depth
};

class ViewTree {
public:
  static ViewTree build(const Graph &g);

  llvm::ArrayRef<ViewCluster> clusters() const { return clusters_; }
  /// Top-level clusters and nodes.
  llvm::ArrayRef<unsigned> rootClusters() const { return roots_; }
  llvm::ArrayRef<const Node *> rootNodes() const { return rootNodes_; }
  /// The innermost cluster of a node; -1 at the top level.
  int clusterOf(const Node *n) const { return clusterOf_.lookup(n) - 1; }

private:
  std::vector<ViewCluster> clusters_;
  std::vector<unsigned> roots_;
  std::vector<const Node *> rootNodes_;
  llvm::DenseMap<const Node *, int> clusterOf_; ///< cluster index + 1 (0: top level)
};

/// A fill colour per device ("#rrggbb"): light grey for the host,
/// well-separated light hues for gpu:K (and other cpu:K), white for none.
std::string deviceColor(std::optional<DeviceId> device);
/// The colour of edges that cross devices.
inline constexpr const char *kCrossingEdgeColor = "#d62f1f";

/// Devices assigned in a module, host first, then by kind and number.
std::vector<DeviceId> devicesOf(const Module &m);

} // namespace graphc
