//===- TowerReplication.cpp - Copying the graph into towers -----------------===//
//
// Stages:
//  1. Classify the nodes: data inputs (first dimension B), variable updates,
//     and the body (everything else but shared inputs); mark the forward
//     nodes (ancestors of a graph output).
//  2. Per non-empty tower, copy the body in graph order (TowerCopier): map the
//     operands, rewrite the attributes that spell the batch from the operands'
//     batch axes, infer the result types again, and find each result's batch
//     axis as the one dimension that went from B to B_t. Anything else that
//     changed means the node mixes the batch with other dimensions: an error.
//     Batch axes come from the shapes themselves, so no op needs a table entry
//     unless an attribute spells the batch.
//  3. Per-tower fix-ups of BatchNorm: moving-variance weights, sync form.
//  4. Tower sums for the updates, the outputs, removal of the originals.
//
//===----------------------------------------------------------------------===//

#include "passes/TowerReplication.h"

#include "passes/Rebatch.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "passes/BatchSplit.h"
#include "passes/SyncBatchNorm.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace graphc {

std::string towerPrefix(int tower) {
  return "tower_" + std::to_string(tower) + "/";
}

DeviceId towerDevice(int tower) {
  return DeviceId::gpu((unsigned)tower);
}

llvm::StringRef stripTowerPrefix(llvm::StringRef name, int *tower) {
  if (tower)
    *tower = -1;
  llvm::StringRef rest = name;
  if (!rest.consume_front("tower_"))
    return name;
  size_t slash = rest.find('/');
  unsigned t = 0;
  if (slash == llvm::StringRef::npos || slash == 0 || rest.take_front(slash).getAsInteger(10, t))
    return name;
  if (tower)
    *tower = (int)t;
  return rest.drop_front(slash + 1);
}

llvm::Expected<std::vector<int64_t>> towerBatches(const Module &m, llvm::StringRef pass) {
  if (!m.plan().towerBatches)
    return makeError(pass + ": the module has no towers; run replicate-towers first");
  const Ints &sizes = *m.plan().towerBatches;
  return std::vector<int64_t>(sizes.begin(), sizes.end());
}

namespace {

/// Elements per channel (axis 1) of a BatchNorm input.
int64_t perChannelCount(const TensorType &t) {
  return t.rank() < 2 || t.shape[1] == 0 ? 0 : t.numElements() / t.shape[1];
}

Value *scalarOf(Builder &b, double v, DType t, llvm::StringRef leaf) {
  Tensor c(TensorType(t, {}));
  c.set(0, v);
  return b.constant(std::move(c), leaf);
}

struct Classified {
  std::vector<Node *> batchInputs, updates, body;
  llvm::DenseSet<const Node *> erased; ///< everything above
  llvm::DenseSet<const Node *> forward;
};

Classified classify(Graph &g, int64_t batch) {
  Classified c;
  for (Node *n : g.nodes()) {
    if (n->op() == Op::Input) {
      const TensorType &t = n->result()->type();
      if (t.rank() >= 1 && t.shape[0] == batch)
        c.batchInputs.push_back(n);
      else
        continue; // shared by every tower
    } else if (isVariableUpdate(n->op())) {
      c.updates.push_back(n);
    } else {
      c.body.push_back(n);
    }
    c.erased.insert(n);
  }
  llvm::SmallVector<const Node *, 64> work;
  for (const Value *v : g.outputs())
    work.push_back(v->producer());
  while (!work.empty()) {
    const Node *n = work.pop_back_val();
    if (!c.forward.insert(n).second)
      continue;
    for (const Value *v : n->operands())
      work.push_back(v->producer());
  }
  return c;
}

/// Copies the body into one tower of B_t samples.
class TowerCopier {
public:
  TowerCopier(Graph &g, int tower, int64_t batch, int64_t towerBatch, double lossScaleFactor,
              const Classified &c)
      : b_(g), tower_(tower), prefix_(towerPrefix(tower)), device_(towerDevice(tower)),
        batch_(batch), towerBatch_(towerBatch), lossScaleFactor_(lossScaleFactor), c_(c) {
    b_.setTower(tower);
  }

  int tower() const { return tower_; }
  int64_t towerBatch() const { return towerBatch_; }

  void copyInput(const Node &in) {
    TensorType t = in.result()->type();
    t.shape[0] = towerBatch_;
    b_.setRequestedDevice(DeviceId::host());
    Value *v = b_.input(prefix_ + in.name(), t);
    map_[in.result()] = v;
    if (towerBatch_ != batch_) // otherwise nothing changes and no axis needs finding
      axes_[v] = {0, 1};
  }

  llvm::Error copy(const Node &orig) {
    if (auto e = copyNode(orig))
      return withContext(std::move(e), "replicate-towers: tower " + llvm::Twine(tower_) +
                                           " (batch " + llvm::Twine(towerBatch_) + " of " +
                                           llvm::Twine(batch_) + ")");
    return llvm::Error::success();
  }

  /// The tower's copy of an original value; shared values map to themselves.
  Value *lookup(Value *orig) const {
    auto it = map_.find(orig);
    assert((it != map_.end() || !c_.erased.count(orig->producer())) && "copied out of order");
    return it == map_.end() ? orig : it->second;
  }
  Node *copyOf(const Node *orig) const { return lookup(orig->result(0))->producer(); }

  Builder &builder(DeviceId device) {
    b_.setRequestedDevice(device);
    return b_;
  }

private:
  BatchAxis axis(const Value *v) const {
    auto it = axes_.find(v);
    return it == axes_.end() ? BatchAxis{} : it->second;
  }
  llvm::Error copyNode(const Node &orig);

  Builder b_;
  int tower_;
  std::string prefix_; ///< towerPrefix of the tower
  DeviceId device_;    ///< towerDevice of the tower
  int64_t batch_, towerBatch_;
  double lossScaleFactor_;
  const Classified &c_;
  llvm::DenseMap<const Value *, Value *> map_;
  llvm::DenseMap<const Value *, BatchAxis> axes_; ///< of tower values that carry the batch
};

llvm::Error TowerCopier::copyNode(const Node &orig) {
  llvm::SmallVector<Value *, 4> ops;
  for (Value *v : orig.operands())
    ops.push_back(lookup(v));
  Attrs attrs = orig.attrs();
  const BatchChange change{batch_, towerBatch_};
  if (towerBatch_ != batch_)
    if (auto e = rewriteBatchAttrs(
            orig, ops, [&](const Value *v) { return axis(v); }, change, attrs,
            ", so the batch cannot be split across towers"))
      return e;
  if (orig.op() == Op::SoftmaxCrossEntropy || orig.op() == Op::SoftmaxCrossEntropyGrad)
    // Absent means 1/B at the original node: the global batch, spelled out so
    // the tower does not take the mean over its own slice.
    attrs.set("scale", attrs.getFloat("scale", 1.0 / (double)batch_) * lossScaleFactor_);
  if (attrs.has("grad_of")) {
    attrs.set("tower_grad_of", attrs.getString("grad_of"));
    attrs.erase("grad_of");
  }
  // Variable reads go where aggregate-gradients puts the storage.
  std::optional<DeviceId> device = orig.requestedDevice()      ? orig.requestedDevice()
                                   : orig.op() == Op::Variable ? std::nullopt
                                                               : std::optional<DeviceId>(device_);
  b_.setRequestedDevice(device);
  std::string name;
  name.reserve(prefix_.size() + orig.name().size());
  name += prefix_;
  name += orig.name();
  auto created = b_.tryCreate(orig.op(), ops, std::move(attrs), name);
  if (!created)
    return created.takeError();
  Node *n = *created;
  assert(n->name() == name && "tower names cannot collide with untowered ones");
  if (!device)
    n->setRequestedDevice(std::nullopt);

  bool batchedIn = llvm::any_of(ops, [&](Value *v) { return (bool)axis(v); }), batchedOut = false;
  for (unsigned i = 0; i < n->numResults(); ++i) {
    const TensorType &o = orig.result(i)->type(), &t = n->result(i)->type();
    std::optional<BatchAxis> a = followBatch(o, t, change);
    if (!a)
      return nodeError(orig, "result '" + orig.result(i)->name() + "' would be " + toString(t) +
                                 " instead of " + toString(o) +
                                 " on the tower's batch; the node mixes the batch with other "
                                 "dimensions, so the batch cannot be split across towers");
    if (*a) {
      axes_[n->result(i)] = batchLayout(
          orig, i, *a, ops, [&](const Value *v) { return axis(v); }, change);
      batchedOut = true;
    }
    map_[orig.result(i)] = n->result(i);
  }
  if (batchedIn && !batchedOut && c_.forward.count(&orig) && orig.op() != Op::SoftmaxCrossEntropy)
    return nodeError(orig, "reduces over the batch in the forward pass; each tower would compute "
                           "it over its own slice only, which changes the model");
  return llvm::Error::success();
}

/// The constant scalar `c` in `Mul(stat, c)`, if that is what `user` is.
Node *weightOf(Node *user, const Value *stat) {
  if (user->op() != Op::Mul)
    return nullptr;
  Value *other = user->operand(0) == stat ? user->operand(1) : user->operand(0);
  Node *p = other->producer();
  return p->op() == Op::Constant && other->type().rank() == 0 ? p : nullptr;
}

/// Rescales the unbiasing weight n/(n-1) of the moving variance that reads
/// tower copy `bn`'s batch variance from the original count to `count`.
llvm::Error rewriteVarianceWeight(const Node &orig, Node &bn, int64_t count) {
  int64_t original = perChannelCount(orig.operand(0)->type());
  if (count == original)
    return llvm::Error::success();
  if (count < 2)
    return nodeError(bn, "a tower's batch norm needs more than one value per channel, tower " +
                             llvm::Twine(bn.tower()) + " gets " + toString(bn.operand(0)->type()) +
                             "; use --bn sync, more samples per tower or fewer towers");
  double ratio =
      ((double)count / (double)(count - 1)) / ((double)original / (double)(original - 1));
  Value *var = bn.result(2);
  llvm::SmallVector<Node *, 2> users(var->users().begin(), var->users().end());
  for (Node *u : users) {
    Node *c = weightOf(u, var);
    if (!c)
      continue;
    Tensor t = c->attrs().getTensor("value")->clone();
    t.set(0, t.at(0) * ratio);
    if (c->result()->users().size() == 1) {
      c->attrs().set("value", std::move(t));
      continue;
    }
    Builder b(bn.graph());
    b.setTower(c->tower());
    b.setRequestedDevice(c->requestedDevice());
    Value *fresh = b.constant(std::move(t), c->name());
    bn.graph().moveAfter(fresh->producer(), c);
    u->setOperand(u->operand(0) == var ? 1 : 0, fresh);
  }
  return llvm::Error::success();
}

llvm::Error fixBatchNorms(const Classified &c, std::vector<TowerCopier> &towers,
                          const TowerOptions &opts) {
  bool sync = opts.bn == BnMode::Sync;
  for (Node *orig : c.body) {
    if (orig->op() != Op::BatchNormTrain)
      continue;
    llvm::SmallVector<Node *, 8> copies;
    int64_t global = 0;
    for (TowerCopier &t : towers) {
      copies.push_back(t.copyOf(orig));
      global += perChannelCount(copies.back()->operand(0)->type());
    }
    for (Node *copy : copies)
      if (auto e = rewriteVarianceWeight(*orig, *copy,
                                         sync ? global : perChannelCount(copy->operand(0)->type())))
        return withContext(std::move(e), "replicate-towers");
    if (sync)
      if (auto e = synchronizeBatchNorm(copies, orig->name()))
        return withContext(std::move(e), "replicate-towers");
  }
  return llvm::Error::success();
}

/// A zero tensor of `t`'s type as a Constant in an empty tower.
Value *zeros(Builder &b, const TensorType &t, llvm::StringRef name) {
  return b.constant(Tensor(t), name);
}

/// An update to rebuild once the originals are gone: it will read the sum of
/// `parts`, one value per tower.
struct PendingUpdate {
  Op op;
  std::string name, sumName;
  Attrs attrs, sumAttrs;
  llvm::SmallVector<Value *, 8> parts;
  llvm::SmallVector<Value *, 2> rest; ///< operands after the first
};

/// Each update's operand 0 as one value per tower: the tower's gradient, or
/// its moving-average value weighted by B_t/B; zeros from an empty tower.
llvm::Expected<std::vector<PendingUpdate>> towerParts(Graph &g, const Classified &c,
                                                      std::vector<TowerCopier> &towers,
                                                      const BatchSplit &split) {
  std::vector<PendingUpdate> pending;
  for (Node *u : c.updates) {
    PendingUpdate p{u->op(), u->name(), "", u->attrs(), {}, {}, {}};
    Value *v = u->operand(0);
    Node *producer = v->producer();
    if (!c.erased.count(producer) || producer->op() == Op::Input)
      return nodeError(*u, "replicate-towers: the update reads '" + v->name() +
                               "', which no tower computes; an update must read a gradient or "
                               "a statistic of the batch");
    bool state = u->op() == Op::Assign;
    if (!state && producer->attrs().has("grad_of")) {
      p.sumName = producer->name();
      p.sumAttrs.set("grad_of", producer->attrs().getString("grad_of"));
    } else {
      p.sumName = u->name() + "/sum";
    }
    std::string partLeaf = state ? u->name() + "/weighted" : producer->name();
    auto tower = towers.begin();
    for (unsigned t = 0; t < split.sizes.size(); ++t) {
      std::string prefix = towerPrefix((int)t);
      if (split.sizes[t] == 0) {
        Builder b(g);
        b.setTower((int)t);
        b.setRequestedDevice(towerDevice((int)t));
        p.parts.push_back(zeros(b, v->type(), prefix + partLeaf));
        continue;
      }
      Value *part = tower->lookup(v);
      double weight = (double)split.sizes[t] / (double)split.global;
      if (state && weight != 1.0) {
        Builder &b = tower->builder(towerDevice((int)t));
        Value *w = scalarOf(b, weight, v->type().dtype, prefix + u->name() + "/weight");
        part = b.create(Op::Mul, {part, w}, {}, prefix + partLeaf);
      }
      p.parts.push_back(part);
      ++tower;
    }
    for (unsigned i = 1; i < u->numOperands(); ++i)
      p.rest.push_back(towers.front().lookup(u->operand(i)));
    pending.push_back(std::move(p));
  }
  return pending;
}

} // namespace

llvm::Expected<bool> replicateTowers(Module &m, const TowerOptions &opts) {
  if (opts.towers == 0)
    return false; // no towers asked for: the single-device graph stays as it is
  Graph *g = m.findGraph("main");
  if (!g)
    return makeError("replicate-towers: the module has no graph 'main'");
  std::optional<int64_t> batch = m.batch();
  if (!batch)
    return makeError("replicate-towers: the batch is not bound; run bind-batch with --batch first");
  if (m.plan().towers || llvm::any_of(g->nodes(), [](Node *n) { return n->tower() >= 0; }))
    return makeError("replicate-towers: the module already has towers");
  if (m.plan().accumulate)
    return makeError("replicate-towers: the module already accumulates gradients; "
                     "accumulate-gradients runs after replicate-towers");
  auto split = planBatchSplit(*batch, opts);
  if (!split)
    return withContext(split.takeError(), "replicate-towers");

  Classified c = classify(*g, *batch);
  double lossScaleFactor = (double)*batch / (double)split->global;
  std::vector<TowerCopier> towers;
  for (unsigned t = 0; t < split->sizes.size(); ++t)
    if (split->sizes[t] > 0)
      towers.emplace_back(*g, (int)t, *batch, split->sizes[t], lossScaleFactor, c);
  // Node after node, each copied into every tower: the graph order is the
  // single-device order lifted to towers (see the header).
  for (Node *in : c.batchInputs)
    for (TowerCopier &t : towers)
      t.copyInput(*in);
  for (Node *n : c.body)
    for (TowerCopier &t : towers)
      if (auto e = t.copy(*n))
        return e;
  if (auto e = fixBatchNorms(c, towers, opts))
    return e;

  auto pending = towerParts(*g, c, towers, *split);
  if (!pending)
    return pending.takeError();

  llvm::SmallVector<Value *, 8> outputs;
  for (const TowerCopier &t : towers)
    for (Value *v : g->outputs())
      outputs.push_back(t.lookup(v));
  g->setOutputs(outputs);
  g->eraseIf([&](const Node &n) { return c.erased.count(&n) != 0; });

  Builder b(*g);
  for (PendingUpdate &p : *pending) {
    Value *sum = b.create(Op::AddN, p.parts, std::move(p.sumAttrs), p.sumName);
    llvm::SmallVector<Value *, 3> operands{sum};
    operands.append(p.rest.begin(), p.rest.end());
    auto update = b.tryCreate(p.op, operands, std::move(p.attrs), p.name);
    if (!update)
      return withContext(update.takeError(), "replicate-towers");
  }

  m.plan().towers = (int64_t)split->sizes.size();
  m.plan().towerBatches = Ints(split->sizes.begin(), split->sizes.end());
  m.plan().batch = split->global;
  return true;
}

} // namespace graphc
