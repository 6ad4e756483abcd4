//===- ColocationGroups.h - Nodes that must share a device ------*- C++ -*-===//
//
// Union-find over a graph's nodes and the storage of its variables. Members of
// one group run on one device:
//   - every node that reads or writes a variable replica (a Variable read, the
//     updates with `var` naming it) together with that replica's storage and
//     the storage of the update's optimizer slots (`slots`);
//   - a node with attribute `colocate_with = "<node name>"` and that node.
// A variable with several storage devices (Variable::devices, mirrored mode)
// has one replica per device and one group per replica: a node belongs to the
// replica its requested device names, else the one its tower indexes.
//
// Groups are numbered by their first member in graph order, so numbering and
// member lists never depend on pointer values.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

namespace graphc {

/// One storage replica of a variable: Variable::devices[replica] when set.
struct VariableReplica {
  std::string var;
  unsigned replica = 0;
  bool operator==(const VariableReplica &o) const = default;
};

class ColocationGroups {
public:
  /// Errors: `colocate_with` naming a node that is not in the graph; a node of
  /// a mirrored variable whose replica its request and tower cannot tell; an
  /// optimizer slot whose replica count differs from its variable's.
  static llvm::Expected<ColocationGroups> build(const Graph &g);

  unsigned numGroups() const { return memberStart_.size() - 1; }
  unsigned groupOf(const Node *n) const { return nodeInfo_.lookup(n).group; }
  /// The group of the node at `position` in graph order.
  unsigned groupAt(unsigned position) const { return groupByPosition_[position]; }
  /// Position of `n` in graph order.
  unsigned position(const Node *n) const { return nodeInfo_.lookup(n).position; }
  /// Members in graph order.
  llvm::ArrayRef<const Node *> members(unsigned group) const {
    return llvm::ArrayRef<const Node *>(members_).slice(
        memberStart_[group], memberStart_[group + 1] - memberStart_[group]);
  }
  /// Variable replicas whose storage the group holds, in first-use order.
  llvm::ArrayRef<VariableReplica> storage(unsigned group) const {
    return llvm::ArrayRef<VariableReplica>(storage_).slice(
        storageStart_[group], storageStart_[group + 1] - storageStart_[group]);
  }
  /// Why members are together ("reads or writes variable 'w'",
  /// "colocate_with 'x'"), one line per union that joined two groups. Worded
  /// on demand (only errors quote it) from the nodes, which must not change
  /// in between.
  std::vector<std::string> why(unsigned group) const;

private:
  struct NodeInfo {
    unsigned position = 0, group = 0;
  };
  /// A union that joined two groups: node `element` and what it shares.
  struct Union {
    enum Kind : unsigned char { Variable, Slot, ColocateWith } kind;
    unsigned element;
    unsigned group;
    unsigned slot; ///< index into the node's `slots` (Slot only)
  };

  llvm::DenseMap<const Node *, NodeInfo> nodeInfo_;
  std::vector<const Node *> nodes_; ///< graph order
  std::vector<unsigned> groupByPosition_;
  // Members and storage of group g: [start[g], start[g + 1]) of the lists.
  std::vector<const Node *> members_;
  std::vector<unsigned> memberStart_{0};
  std::vector<VariableReplica> storage_;
  std::vector<unsigned> storageStart_{0};
  std::vector<Union> unions_;
};

/// The replica of variable `var` that node `n` uses (0 when the variable has
/// at most one storage device); an error when neither n's request nor its
/// tower says.
llvm::Expected<unsigned> replicaOf(const Node &n, const Variable &var);

} // namespace graphc
