//===- Module.h - Module, Graph, Node, Value, Variable ----------*- C++ -*-===//
//
// The IR. A Module owns its variables and one or more Graphs. A Graph owns
// Nodes in SSA form: every Value is result `i` of exactly one Node, and is read
// by any number of Nodes (use lists are kept up to date by Node). Graph inputs
// are `Input` nodes and variable reads are `Variable` nodes, so a Value always
// has a producer. Node order is a topological order; passes that append nodes
// out of order call Graph::sortTopologically().
//
// A Node carries, besides op, operands, results and attributes, the tower it
// belongs to (-1: none), the device a user or pass requested, the device the
// placer assigned, and the placer's reason (TensorFlow's requested/assigned
// split). Node names keep the model's scopes ("Mixed_5b/branch1x1/conv").
//
// Devices are typed: a node's requested and assigned devices are each a
// DeviceId or none (std::nullopt: nothing requested, not placed yet), and a
// variable's storage devices are DeviceIds. The text form ("gpu:3") exists
// only at the edges: the parser reads it (and refuses a bad one), the printer
// writes DeviceId::str().
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Attribute.h"
#include "ir/DeviceId.h"
#include "ir/Op.h"
#include "ir/PlanInfo.h"
#include "ir/Shards.h"
#include "ir/Type.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace graphc {

class Graph;
class Module;
class Node;

class Value {
public:
  const std::string &name() const { return name_; }
  const TensorType &type() const { return type_; }
  void setType(TensorType t) { type_ = std::move(t); }
  Node *producer() const { return producer_; }
  unsigned resultIndex() const { return index_; }
  /// Every reading node, once per operand slot that reads this value.
  llvm::ArrayRef<Node *> users() const { return users_; }
  bool hasUsers() const { return !users_.empty(); }
  /// Redirects every operand that reads this value to `other`.
  void replaceAllUsesWith(Value *other);

private:
  friend class Node;
  friend class Graph;
  Value(Node *producer, unsigned index, std::string name, TensorType type)
      : name_(std::move(name)), type_(std::move(type)), producer_(producer), index_(index) {}
  void dropUse(Node *user);

  std::string name_;
  TensorType type_;
  Node *producer_;
  unsigned index_;
  llvm::SmallVector<Node *, 2> users_;
};

class Node {
public:
  Op op() const { return op_; }
  const std::string &name() const { return name_; }
  Graph &graph() const { return *graph_; }

  llvm::ArrayRef<Value *> operands() const { return operands_; }
  Value *operand(unsigned i) const { return operands_[i]; }
  unsigned numOperands() const { return operands_.size(); }
  void setOperand(unsigned i, Value *v);
  void addOperand(Value *v);
  void setOperands(llvm::ArrayRef<Value *> vs);

  llvm::ArrayRef<std::unique_ptr<Value>> results() const { return results_; }
  Value *result(unsigned i = 0) const { return results_[i].get(); }
  unsigned numResults() const { return results_.size(); }

  Attrs &attrs() { return attrs_; }
  const Attrs &attrs() const { return attrs_; }

  int tower() const { return tower_; }
  void setTower(int t) { tower_ = t; }
  /// None: nothing requested.
  std::optional<DeviceId> requestedDevice() const { return requested_; }
  void setRequestedDevice(std::optional<DeviceId> d) { requested_ = d; }
  /// None: not placed (yet).
  std::optional<DeviceId> assignedDevice() const { return assigned_; }
  void setAssignedDevice(std::optional<DeviceId> d) { assigned_ = d; }
  const std::string &placementReason() const { return reason_; }
  void setPlacementReason(std::string r) { reason_ = std::move(r); }

  /// Copies tower, requested device and (when asked) assigned device from `o`.
  void copyPlacementFrom(const Node &o, bool assigned = false);

private:
  friend class Graph;
  Node(Graph *g, Op op, std::string name) : graph_(g), op_(op), name_(std::move(name)) {}
  void dropOperands();

  Graph *graph_;
  Op op_;
  std::string name_;
  llvm::SmallVector<Value *, 4> operands_;
  llvm::SmallVector<std::unique_ptr<Value>, 1> results_;
  Attrs attrs_;
  int tower_ = -1;
  std::optional<DeviceId> requested_, assigned_;
  std::string reason_;
};

/// An error about `n`: "node 'Mixed_5b/branch1x1/conv' (Conv): <msg>".
llvm::Error nodeError(const Node &n, const llvm::Twine &msg);

class Graph {
public:
  Graph(Module &m, std::string name) : module_(&m), name_(std::move(name)) {}
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  Module &module() const { return *module_; }
  const std::string &name() const { return name_; }

  /// Appends a node. `name` must be unique in the graph (see uniqueName);
  /// results are named `name` (one result) or `name:i`.
  Node *createNode(Op op, llvm::ArrayRef<Value *> operands, llvm::ArrayRef<TensorType> resultTypes,
                   Attrs attrs, llvm::StringRef name);
  /// Same, with result names chosen by the caller (the parser's path).
  Node *createNodeWithResultNames(Op op, llvm::ArrayRef<Value *> operands,
                                  llvm::ArrayRef<TensorType> resultTypes,
                                  llvm::ArrayRef<std::string> resultNames, Attrs attrs,
                                  llvm::StringRef name);
  /// Removes a node whose results are unused (asserts otherwise).
  void erase(Node *n);
  /// Removes every node for which `pred` holds; their results must be unused
  /// by nodes that stay.
  void eraseIf(llvm::function_ref<bool(const Node &)> pred);

  size_t numNodes() const { return nodes_.size(); }
  /// Nodes in order. Do not create or erase while iterating.
  auto nodes() const {
    return llvm::map_range(nodes_, [](const std::unique_ptr<Node> &n) { return n.get(); });
  }
  /// Input nodes in order.
  std::vector<Node *> inputs() const;
  Node *findInput(llvm::StringRef name) const;

  llvm::ArrayRef<Value *> outputs() const { return outputs_; }
  void addOutput(Value *v) { outputs_.push_back(v); }
  void setOutputs(llvm::ArrayRef<Value *> vs) { outputs_.assign(vs.begin(), vs.end()); }

  Node *findNode(llvm::StringRef name) const;
  Value *findValue(llvm::StringRef name) const;
  /// `base` if unused, else `base_1`, `base_2`, ...
  std::string uniqueName(llvm::StringRef base) const;
  /// Renames a node (and its single result, when named after it).
  void rename(Node *n, llvm::StringRef name);

  /// Reorders nodes topologically, keeping the current order where it is
  /// already valid (stable). Returns false if there is a cycle.
  bool sortTopologically();
  /// Moves `n` to just after `anchor` in the node order (the caller keeps the
  /// order topological, or sorts afterwards). Passes use it to place a node
  /// where the executor should issue it, e.g. an all-reduce right after the
  /// last gradient of its bucket.
  void moveAfter(Node *n, Node *anchor);
  /// Many moves in one pass over the node order: each (node, anchor) puts the
  /// node just after its anchor; nodes given the same anchor follow it in the
  /// order given, and a moved node that is itself an anchor brings its
  /// followers along. Anchors must not form a cycle.
  void moveAfter(llvm::ArrayRef<std::pair<Node *, Node *>> moves);
  /// Puts the nodes in `order`, a permutation of them that the caller keeps
  /// topological (e.g. a scheduler's issue order).
  void reorder(llvm::ArrayRef<Node *> order);

private:
  Module *module_;
  std::string name_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value *> outputs_;
  /// The node and the value of each name. One table for both, as a node of
  /// one result shares its name with the result: one look-up checks a name
  /// and one entry holds both. An entry lives while either is set.
  struct Named {
    Node *node = nullptr;
    Value *value = nullptr;
  };
  llvm::StringMap<Named> names_;
  void forgetNames(Node *n);
};

/// What a variable is for: a trainable parameter, non-trainable state (BN
/// running statistics, step counters), an optimizer slot, or an accumulator
/// (gradient accumulation's per-tower sums over the micro-steps of one update,
/// passes/AccumulateGradients.h: zero at every update boundary, so never
/// checkpointed).
enum class VarKind : unsigned char { Param, State, Slot, Accumulator };
llvm::StringRef varKindName(VarKind k);
std::optional<VarKind> parseVarKind(llvm::StringRef s);

/// Dynamic loss scaling's variables (passes/LossScaling.h): the scale, the
/// finite steps since it last moved, the steps skipped.
inline constexpr llvm::StringLiteral kLossScaleVar = "loss_scale";
inline constexpr llvm::StringLiteral kGoodStepsVar = "loss_scale/good_steps";
inline constexpr llvm::StringLiteral kSkippedStepsVar = "loss_scale/skipped_steps";
/// Whether `name` is one of them: training state that a checkpoint may lack
/// (the run starts scaling from its initial scale) or carry to a run that
/// does not scale (which ignores it).
inline bool isLossScaleState(llvm::StringRef name) {
  return name == kLossScaleVar || name == kGoodStepsVar || name == kSkippedStepsVar;
}

/// How a variable gets its first value when no data is attached:
/// zeros, ones, constant(v), normal(mean, std), trunc_normal(mean, std, lo, hi),
/// uniform(lo, hi), kaiming_normal(gain), kaiming_uniform(a), xavier_uniform(gain),
/// elided (the data exists but was not printed; not runnable).
struct Initializer {
  std::string fn = "zeros";
  std::vector<double> args;
  bool operator==(const Initializer &o) const { return fn == o.fn && args == o.args; }
};

struct Variable {
  std::string name;
  TensorType type;
  VarKind kind = VarKind::Param;
  Initializer init;
  Tensor data; ///< explicit value (imported weights, a checkpoint); may be empty
  /// Where the storage lives once placed: one device, or one per replica
  /// (mirrored). Empty before placement.
  std::vector<DeviceId> devices;
  /// Sharded optimizer state (--shard-optimizer): devices[r] holds only
  /// piece r of the value (shardRange over devices.size()), not a replica.
  /// The variable itself (its type, its checkpoint tensor) stays whole.
  bool sharded = false;

  /// The bytes of its storage on `d`: 0 where it has none.
  int64_t bytesOn(DeviceId d) const;
  bool trainable() const { return kind == VarKind::Param; }
  /// Whether its value outlives an update and belongs in checkpoints (all
  /// but accumulators).
  bool persistent() const { return kind != VarKind::Accumulator; }
  bool operator==(const Variable &o) const {
    return name == o.name && type == o.type && kind == o.kind && init == o.init && data == o.data &&
           devices == o.devices && sharded == o.sharded;
  }
};

class Module {
public:
  explicit Module(std::string name = "module") : name_(std::move(name)) {}
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  /// What the module says about the plan it is (the bound batch, towers,
  /// workers, cluster, precision, ...), printed in the module header.
  PlanInfo &plan() { return plan_; }
  const PlanInfo &plan() const { return plan_; }
  /// The bound batch size, if bindBatch has run.
  std::optional<int64_t> batch() const { return plan_.batch; }

  Variable &addVariable(Variable v);
  Variable *findVariable(llvm::StringRef name);
  const Variable *findVariable(llvm::StringRef name) const;
  std::vector<Variable> &variables() { return variables_; }
  const std::vector<Variable> &variables() const { return variables_; }
  void removeVariable(llvm::StringRef name);
  /// Removes the variables that no node of graph main uses, keeping the rest
  /// in order. A node uses the variable its Variable read names, and those an
  /// update writes (`var` and `slots`); other graphs are not looked at, and
  /// without a main graph no variable is used.
  void removeUnusedVariables();

  Graph &addGraph(std::string name);
  void removeGraph(llvm::StringRef name);
  Graph *findGraph(llvm::StringRef name) const;
  /// The graph named "main" (created on first use).
  Graph &main();
  std::vector<Graph *> graphs() const;

private:
  std::string name_;
  PlanInfo plan_;
  std::vector<Variable> variables_;
  llvm::StringMap<size_t> variableIndex_;
  std::vector<std::unique_ptr<Graph>> graphs_;
  void reindexVariables();
};

} // namespace graphc
