//===- AggregateGradients.cpp - Parameter modes and all-reduce buckets ------===//
//
// Stages:
//  1. Find the reductions: every update and the tower sum it reads.
//  2. Decide each variable's storage devices from --params (its optimizer
//     slots follow it) and stamp them on the variable, its reads, its tower
//     sum and its update.
//  3. Mirrored only: order the reductions by readiness, cut them into
//     buckets, and replace the tower sums and updates by per-tower
//     AllReduces and per-replica updates; with --shard-optimizer, gradient
//     buckets by ReduceScatters, updates of one piece each, and an AllGather
//     per variable.
//
//===----------------------------------------------------------------------===//

#include "passes/AggregateGradients.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "passes/TowerReplication.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <numeric>

namespace graphc {

std::vector<unsigned> balanceByBytes(llvm::ArrayRef<int64_t> bytes, unsigned devices) {
  assert(devices > 0);
  std::vector<size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  std::vector<int64_t> load(devices, 0);
  std::vector<unsigned> device(bytes.size(), 0);
  for (size_t i : order) {
    unsigned d = (unsigned)(std::min_element(load.begin(), load.end()) - load.begin());
    device[i] = d;
    load[d] += bytes[i];
  }
  return device;
}

std::vector<size_t> bucketBoundaries(llvm::ArrayRef<int64_t> bytes, int64_t cap) {
  std::vector<size_t> starts{0};
  int64_t filled = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i > starts.back() && filled + bytes[i] > cap) {
      starts.push_back(i);
      filled = 0;
    }
    filled += bytes[i];
  }
  if (!bytes.empty())
    starts.push_back(bytes.size());
  return starts;
}

namespace {

struct Reduction {
  Node *update = nullptr; ///< Apply* or Assign
  Node *sum = nullptr;    ///< the tower sum it reads
  bool state = false;     ///< a moving average (Assign), not a gradient
};

/// Whether `n` reads or writes a gradient accumulator (they stay on their
/// tower's device: AccumulateGradients.h).
bool touchesAccumulator(const Module &m, const Node &n) {
  const Variable *v = m.findVariable(n.attrs().getString("var"));
  return v && !v->persistent();
}

llvm::Expected<std::vector<Reduction>> findReductions(const Module &m, Graph &g, unsigned towers) {
  std::vector<Reduction> out;
  for (Node *n : g.nodes()) {
    if (!isVariableUpdate(n->op()) || touchesAccumulator(m, *n))
      continue;
    Node *s = n->operand(0)->producer();
    bool towerSum = s->op() == Op::AddN && s->tower() < 0 && s->numOperands() == towers &&
                    s->result()->users().size() == 1;
    for (unsigned t = 0; towerSum && t < towers; ++t)
      towerSum = s->operand(t)->producer()->tower() == (int)t;
    if (!towerSum)
      return nodeError(*n, "aggregate-gradients: the update does not read a sum over the " +
                               llvm::Twine(towers) +
                               " towers (AddN, operand t from tower t); run replicate-towers "
                               "first");
    out.push_back({n, s, n->op() == Op::Assign});
  }
  return out;
}

/// Variables the graph uses, in module order, with the slots that follow them.
struct Placed {
  std::vector<std::string> vars;
  llvm::StringMap<std::vector<std::string>> slots;
};

Placed usedVariables(const Module &m, const Graph &g) {
  llvm::StringMap<bool> used;
  Placed p;
  for (const Node *n : g.nodes()) {
    if ((n->op() != Op::Variable && !isVariableUpdate(n->op())) || touchesAccumulator(m, *n))
      continue;
    std::string var = n->attrs().getString("var");
    used[var] = true;
    for (const std::string &slot : n->attrs().getStrings("slots")) {
      auto &list = p.slots[var];
      if (!llvm::is_contained(list, slot))
        list.push_back(slot);
    }
  }
  for (const Variable &v : m.variables())
    if (used.count(v.name))
      p.vars.push_back(v.name);
  return p;
}

int64_t bytesWithSlots(const Module &m, const Placed &p, const std::string &var) {
  int64_t bytes = m.findVariable(var)->type.bytes();
  auto it = p.slots.find(var);
  if (it != p.slots.end())
    for (const std::string &slot : it->second)
      if (const Variable *s = m.findVariable(slot))
        bytes += s->type.bytes();
  return bytes;
}

void setStorage(Module &m, const Placed &p, const std::string &var,
                const std::vector<DeviceId> &devices) {
  m.findVariable(var)->devices = devices;
  auto it = p.slots.find(var);
  if (it != p.slots.end())
    for (const std::string &slot : it->second)
      if (Variable *s = m.findVariable(slot))
        s->devices = devices;
}

/// Node positions in graph order (recomputed after nodes move).
llvm::DenseMap<const Node *, unsigned> positions(const Graph &g) {
  llvm::DenseMap<const Node *, unsigned> pos;
  unsigned i = 0;
  for (const Node *n : g.nodes())
    pos[n] = i++;
  return pos;
}

/// The node that computes a tower's part: through a view Identity (the
/// gradient's name) to the node doing the work.
const Node *workOf(const Value *part) {
  const Node *n = part->producer();
  while (n->op() == Op::Identity)
    n = n->operand(0)->producer();
  return n;
}

llvm::Error mirror(Module &m, Graph &g, const Placed &placed, std::vector<Reduction> &reductions,
                   unsigned towers, const std::vector<int64_t> &sizes, int64_t cap, bool shard) {
  std::vector<DeviceId> all;
  for (unsigned t = 0; t < towers; ++t)
    all.push_back(towerDevice((int)t));
  for (const std::string &var : placed.vars)
    setStorage(m, placed, var, all);
  // Sharded optimizer state: tower t keeps piece t of every update's slots.
  if (shard)
    for (const Reduction &r : reductions)
      if (!r.state)
        for (const std::string &slot : r.update->attrs().getStrings("slots"))
          m.findVariable(slot)->sharded = true;
  for (Graph *each : m.graphs()) // the micro-step graph reads the same replicas
    for (Node *n : each->nodes())
      if (n->op() == Op::Variable && n->tower() >= 0)
        n->setRequestedDevice(towerDevice(n->tower()));

  // A gradient's name (Identity) moves next to the node computing it, so its
  // position is when it becomes ready (several of one node: the last
  // reduction's first).
  std::vector<std::pair<Node *, Node *>> moves;
  for (Reduction &r : llvm::reverse(reductions))
    for (unsigned t = 0; t < towers; ++t) {
      Node *part = r.sum->operand(t)->producer();
      if (part->op() == Op::Identity)
        moves.emplace_back(part, part->operand(0)->producer());
    }
  g.moveAfter(moves);
  unsigned reference =
      (unsigned)(std::find_if(sizes.begin(), sizes.end(), [](int64_t s) { return s > 0; }) -
                 sizes.begin());
  auto pos = positions(g);
  std::vector<size_t> order(reductions.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Reduction &x = reductions[a], &y = reductions[b];
    if (x.state != y.state)
      return !x.state;
    return pos.lookup(workOf(x.sum->operand(reference))) <
           pos.lookup(workOf(y.sum->operand(reference)));
  });

  // Buckets: gradients first, then moving averages; never mixed.
  std::vector<std::vector<size_t>> buckets;
  for (bool state : {false, true}) {
    std::vector<size_t> members;
    std::vector<int64_t> bytes;
    for (size_t i : order)
      if (reductions[i].state == state) {
        members.push_back(i);
        bytes.push_back(reductions[i].sum->result()->type().bytes());
      }
    std::vector<size_t> starts = bucketBoundaries(bytes, cap);
    for (size_t k = 0; k + 1 < starts.size(); ++k)
      buckets.emplace_back(members.begin() + starts[k], members.begin() + starts[k + 1]);
  }

  // Where each AllReduce goes: right after its anchor, the latest of its
  // parts' producers, the tower's previous AllReduce and (moving averages)
  // everything else the tower does. The nodes are moved all at once at the
  // end; meanwhile an AllReduce's place in the order is the key of its anchor
  // one step further down the anchor's chain. Anchors are distinct (a tower's
  // anchors are its own nodes, each later than the tower's previous
  // AllReduce), so each node is followed by at most one chain of AllReduces
  // and keys order the nodes as the moves will.
  struct Key {
    unsigned base = 0, depth = 0;
    bool operator<(const Key &o) const { return base != o.base ? base < o.base : depth < o.depth; }
  };
  llvm::DenseMap<const Node *, Key> moved;
  auto keyOf = [&](const Node *n) {
    auto it = moved.find(n);
    return it != moved.end() ? it->second : Key{pos.lookup(n), 0};
  };
  std::vector<Node *> lastOfTower(towers, nullptr);
  for (Node *n : g.nodes())
    if (n->tower() >= 0 && (unsigned)n->tower() < towers)
      lastOfTower[n->tower()] = n;
  std::vector<std::pair<Node *, Node *>> arMoves;

  // reduced[i][t]: reduction i's all-reduced value on tower t.
  std::vector<std::vector<Value *>> reduced(reductions.size(), std::vector<Value *>(towers));
  std::vector<Node *> previous(towers, nullptr);
  unsigned gradBuckets = 0, stateBuckets = 0;
  for (const std::vector<size_t> &bucket : buckets) {
    bool state = reductions[bucket.front()].state;
    std::string group = state ? "state_" + std::to_string(stateBuckets++)
                              : "grads_" + std::to_string(gradBuckets++);
    // Sharded, a gradient bucket is reduce-scattered: tower t gets piece t
    // of each gradient's sum, which is all its update reads.
    const bool scatter = shard && !state;
    for (unsigned t = 0; t < towers; ++t) {
      llvm::SmallVector<Value *, 8> parts;
      for (size_t i : bucket)
        parts.push_back(reductions[i].sum->operand(t));
      Builder b(g);
      b.setTower((int)t);
      b.setRequestedDevice(towerDevice((int)t));
      Attrs a;
      a.set("group", group);
      a.set("rank", (int64_t)t);
      a.set("nranks", (int64_t)towers);
      if (!scatter)
        a.set("reduction", std::string("sum"));
      Node *ar =
          b.createNode(scatter ? Op::ReduceScatter : Op::AllReduce, parts, std::move(a),
                       towerPrefix((int)t) + (scatter ? "reducescatter/" : "allreduce/") + group);
      // After its last part, after the previous bucket, and (moving averages)
      // after everything else the tower does.
      Node *anchor = previous[t];
      Key anchorKey = anchor ? keyOf(anchor) : Key{};
      auto later = [&](Node *n) {
        Key k = keyOf(n);
        if (!anchor || anchorKey < k) {
          anchor = n;
          anchorKey = k;
        }
      };
      for (Value *p : parts)
        later(p->producer());
      if (state && lastOfTower[t])
        later(lastOfTower[t]);
      assert(anchor && "an AllReduce has parts");
      moved[ar] = Key{anchorKey.base, anchorKey.depth + 1};
      arMoves.emplace_back(ar, anchor);
      previous[t] = ar;
      for (size_t j = 0; j < bucket.size(); ++j)
        reduced[bucket[j]][t] = ar->result((unsigned)j);
    }
  }
  g.moveAfter(arMoves);

  // One update per replica, tower after tower, in the original update order.
  for (unsigned t = 0; t < towers; ++t) {
    Builder b(g);
    b.setTower((int)t);
    b.setRequestedDevice(towerDevice((int)t));
    for (size_t i = 0; i < reductions.size(); ++i) {
      Node *u = reductions[i].update;
      llvm::SmallVector<Value *, 3> operands{reduced[i][t]};
      for (unsigned k = 1; k < u->numOperands(); ++k)
        operands.push_back(u->operand(k));
      Attrs a = u->attrs();
      if (shard && !reductions[i].state) { // the update of piece t
        a.set("rank", (int64_t)t);
        a.set("nranks", (int64_t)towers);
      }
      auto copy = b.tryCreate(u->op(), operands, std::move(a), towerPrefix((int)t) + u->name());
      if (!copy)
        return copy.takeError();
    }
    // Then each updated piece goes to every replica, in the same order on
    // every tower (the schedule puts each after its variable's update on the
    // tower: placement/analysis/Schedule.h).
    for (size_t i = 0; shard && i < reductions.size(); ++i) {
      if (reductions[i].state)
        continue;
      const std::string &var = reductions[i].update->attrs().getString("var");
      Attrs a;
      a.set("group", "gather_" + std::to_string(i));
      a.set("rank", (int64_t)t);
      a.set("nranks", (int64_t)towers);
      a.set("var", var);
      auto gather =
          b.tryCreate(Op::AllGather, {}, std::move(a), towerPrefix((int)t) + "allgather/" + var);
      if (!gather)
        return gather.takeError();
    }
  }
  llvm::DenseSet<const Node *> replaced;
  for (Reduction &r : reductions) {
    replaced.insert(r.update);
    replaced.insert(r.sum);
  }
  g.eraseIf([&](const Node &n) { return replaced.count(&n) != 0; });
  return llvm::Error::success();
}

} // namespace

llvm::Expected<bool> aggregateGradients(Module &m, const AggregateOptions &opts) {
  Graph *g = m.findGraph("main");
  if (!g)
    return makeError("aggregate-gradients: the module has no graph 'main'");
  if (opts.towers == 0 && !m.plan().towerBatches)
    return false; // no towers asked for, none made
  auto sizes = towerBatches(m, "aggregate-gradients");
  if (!sizes)
    return sizes.takeError();
  unsigned towers = (unsigned)sizes->size();
  std::string gpus;
  for (unsigned t = 0; t < towers; ++t)
    gpus += (t ? ", " : "") + towerDevice((int)t).str();

  const ParamPlacement mode = opts.params;
  if (opts.shardOptimizer && mode.kind != ParamPlacement::Mirrored)
    return makeError(kShardNeedsMirrored + (" (got --params " + modeName(mode) + ")"));
  if (mode.kind == ParamPlacement::Auto)
    return makeError("aggregate-gradients: --params auto is decided on a cluster (graphc place "
                     "or graphrun train with --gpus N or --cluster FILE), not inside a compile");
  if (mode.kind == ParamPlacement::Gpu && mode.gpu >= towers)
    return makeError("aggregate-gradients: --params " + modeName(mode) +
                     " names no device of this compile; the towers run on " + gpus +
                     " (host: " + DeviceId::host().str() + ")");

  auto reductions = findReductions(m, *g, towers);
  if (!reductions)
    return reductions.takeError();
  Placed placed = usedVariables(m, *g);
  if (mode.kind == ParamPlacement::Mirrored) {
    if (auto e = mirror(m, *g, placed, *reductions, towers, *sizes, opts.bucketBytes,
                        opts.shardOptimizer))
      return withContext(std::move(e), "aggregate-gradients");
    return true;
  }

  // A variable the reductions do not place reads as none: no request.
  llvm::StringMap<std::optional<DeviceId>> deviceOf;
  if (mode.kind == ParamPlacement::Spread) {
    std::vector<int64_t> bytes;
    for (const std::string &var : placed.vars)
      bytes.push_back(bytesWithSlots(m, placed, var));
    std::vector<unsigned> device = balanceByBytes(bytes, towers);
    for (size_t i = 0; i < placed.vars.size(); ++i)
      deviceOf[placed.vars[i]] = towerDevice((int)device[i]);
  } else {
    DeviceId device =
        mode.kind == ParamPlacement::Gpu ? towerDevice((int)mode.gpu) : DeviceId::host();
    for (const std::string &var : placed.vars)
      deviceOf[var] = device;
  }
  for (const std::string &var : placed.vars)
    setStorage(m, placed, var, {*deviceOf[var]});
  for (Graph *each : m.graphs()) // the micro-step graph reads the same storage
    for (Node *n : each->nodes())
      if (n->op() == Op::Variable && !touchesAccumulator(m, *n))
        n->setRequestedDevice(deviceOf[n->attrs().getString("var")]);
  for (Reduction &r : *reductions) {
    std::optional<DeviceId> device = deviceOf[r.update->attrs().getString("var")];
    r.update->setRequestedDevice(device);
    r.sum->setRequestedDevice(device);
  }
  return true;
}

} // namespace graphc
