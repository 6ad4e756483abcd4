//===- ModelParallel.cpp - List schedules over colocation groups ----------===//

#include "placement/ModelParallel.h"

#include "ir/Diagnostics.h"
#include "ir/MemoryLimit.h"
#include "placement/ColocationGroups.h"
#include "placement/analysis/MemoryNeeds.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>
#include <set>

namespace graphc {

namespace {

class Scheduler {
public:
  Scheduler(Graph &g, const Cluster &c, const KernelAvailability &kernels,
            const ModelParallelOptions &o, int64_t batch, ColocationGroups groups)
      : g_(g), c_(c), kernels_(kernels), o_(o), times_(c, o.times), batch_(batch),
        groups_(std::move(groups)) {}

  llvm::Expected<ModelParallelPlan> run() {
    for (const ClusterDevice &d : c_.devices()) {
      plan_.devices.push_back({d.name});
      capacity_.push_back((int64_t)(d.memoryBytes * o_.shareOf(d.name)));
    }
    free_.assign(c_.devices().size(), 0.0);
    live_.assign(c_.devices().size(), 0);
    held_.assign(c_.devices().size(), MemoryNeed());
    groupDevice_.assign(groups_.numGroups(), -1);
    if (auto e = prepare())
      return e;
    std::vector<Node *> ready;
    for (Node *n : g_.nodes())
      if (waiting_[n] == 0)
        ready.push_back(n);
    while (!ready.empty()) {
      Choice best;
      for (size_t i : considered(ready))
        for (unsigned d : candidates(ready[i])) {
          Choice c = consider(ready[i], d);
          c.readyIndex = i;
          if (c.fits && (!best.fits || c.better(best, o_.order)))
            best = c;
        }
      if (!best.fits)
        return unplaceable(ready);
      Node *n = ready[best.readyIndex];
      ready.erase(ready.begin() + best.readyIndex);
      place(n, best);
      for (Node *succ : successors_[n])
        if (--waiting_[succ] == 0)
          ready.push_back(succ);
    }
    for (auto &[n, d] : device_)
      n->setRequestedDevice(c_.devices()[d].id);
    // The executor issues each device's nodes in graph order: the schedule's,
    // whose memory the placement counted.
    g_.reorder(order_);
    for (unsigned d = 0; d < plan_.devices.size(); ++d)
      plan_.stepSeconds = std::max(plan_.stepSeconds, free_[d]);
    plan_.order = o_.order;
    return std::move(plan_);
  }

private:
  struct Choice {
    bool fits = false;
    unsigned device = 0;
    double start = 0, end = 0;
    double roomAfter = 0; ///< the share of the device's memory still free after it
    unsigned position = 0;
    size_t readyIndex = 0;
    int64_t copyBytes = 0; ///< operands copied to the device for it
    bool followsLast = false; ///< the device of the node placed just before
    /// m-ETF: earliest start, then earliest end; a tie (variables, free at
    /// any time) goes to the device with the most memory to spare, so that
    /// the devices fill evenly instead of the first one filling up.
    /// Memory order: first the fewest bytes copied (a chain stays on its
    /// device, and a copy held until its producer's last use elsewhere is
    /// what spreading costs), then the device of the node before (a
    /// variable goes where its consumer runs), then as m-ETF.
    bool better(const Choice &o, ScheduleOrder order) const {
      if (order == ScheduleOrder::MemoryOrder) {
        if (copyBytes != o.copyBytes)
          return copyBytes < o.copyBytes;
        if (followsLast != o.followsLast)
          return followsLast;
      }
      if (start != o.start)
        return start < o.start;
      if (end != o.end)
        return end < o.end;
      if (position != o.position)
        return position < o.position;
      if (roomAfter != o.roomAfter)
        return roomAfter > o.roomAfter;
      return device < o.device;
    }
  };

  llvm::Error prepare() {
    for (Node *n : g_.nodes()) {
      position_[n] = position_.size();
      int64_t bytes = 0;
      for (const auto &v : n->results())
        bytes += v->type().bytes(batch_);
      outBytes_[n] = bytes;
      unsigned preds = 0;
      llvm::SmallPtrSet<Node *, 8> seen;
      for (Value *v : n->operands()) {
        Node *p = v->producer();
        if (seen.insert(p).second) {
          successors_[p].push_back(n);
          ++preds;
        }
      }
      waiting_[n] = preds;
      consumersLeft_[n] = 0;
    }
    for (Node *n : g_.nodes())
      for (Node *succ : successors_[n])
        (void)succ, ++consumersLeft_[n];
    // Each group's variable storage, and the devices every member can run on.
    groupBytes_.assign(groups_.numGroups(), 0);
    groupStored_.assign(groups_.numGroups(), MemoryNeed());
    groupDevices_.assign(groups_.numGroups(), {});
    for (unsigned grp = 0; grp < groups_.numGroups(); ++grp) {
      for (const VariableReplica &r : groups_.storage(grp))
        if (const Variable *v = g_.module().findVariable(r.var)) {
          groupBytes_[grp] += v->type.bytes();
          addStored(groupStored_[grp], *v);
        }
      bool input =
          llvm::any_of(groups_.members(grp), [](const Node *n) { return n->op() == Op::Input; });
      for (unsigned d = 0; d < c_.devices().size(); ++d) {
        const ClusterDevice &dev = c_.devices()[d];
        if (input ? !dev.id.isHost() : dev.id.isHost())
          continue;
        if (llvm::all_of(groups_.members(grp), [&](const Node *n) {
              return runsWithoutKernel(n->op()) || kernels_(*n, dev.kind);
            }))
          groupDevices_[grp].push_back(d);
      }
      if (groupDevices_[grp].empty() && !input) // nothing a GPU can run: the host
        groupDevices_[grp].push_back(0);
      if (groupDevices_[grp].empty())
        return nodeError(*groups_.members(grp).front(),
                         "cannot be placed: no device of the cluster can run its group");
    }
    return llvm::Error::success();
  }

  /// The ready nodes a step may take: all (m-ETF), or one (memory order):
  /// the one that adds the fewest bytes to what is live, the first in graph
  /// order on a tie. A branch that shrinks (its reads' last use frees them)
  /// is finished before another grows.
  llvm::SmallVector<size_t, 8> considered(llvm::ArrayRef<Node *> ready) const {
    llvm::SmallVector<size_t, 8> out;
    if (o_.order == ScheduleOrder::EarliestStart) {
      for (size_t i = 0; i < ready.size(); ++i)
        out.push_back(i);
      return out;
    }
    auto key = [&](Node *n) { return std::make_pair(netBytes(n), position_.lookup(n)); };
    size_t first = 0;
    for (size_t i = 1; i < ready.size(); ++i)
      if (key(ready[i]) < key(ready[first]))
        first = i;
    out.push_back(first);
    return out;
  }

  /// The bytes placing `n` adds to what is live: its results, less those
  /// of the producers whose last consumer it is.
  int64_t netBytes(Node *n) const {
    int64_t bytes = outBytes_.lookup(n);
    for (Node *p : producers(n))
      if (consumersLeft_.lookup(p) == 1)
        bytes -= outBytes_.lookup(p);
    return bytes;
  }

  llvm::SmallVector<unsigned, 8> candidates(Node *n) const {
    unsigned grp = groups_.groupOf(n);
    if (groupDevice_[grp] >= 0)
      return {(unsigned)groupDevice_[grp]};
    return llvm::SmallVector<unsigned, 8>(groupDevices_[grp].begin(), groupDevices_[grp].end());
  }

  /// The bytes `n` needs on `d` now: its results, its group's variables
  /// when the group is not placed yet, and a copy of each operand made on
  /// another device that `d` does not hold yet.
  int64_t need(Node *n, int d = -1) const {
    int64_t bytes = outBytes_.lookup(n);
    if (groupDevice_[groups_.groupOf(n)] < 0)
      bytes += groupBytes_[groups_.groupOf(n)];
    if (d >= 0)
      for (Node *p : producers(n))
        if (device_.lookup(p) != (unsigned)d && !copies_.count({p, (unsigned)d}))
          bytes += outBytes_.lookup(p);
    return bytes;
  }

  /// n's operands' producers, each once.
  llvm::SmallVector<Node *, 4> producers(Node *n) const {
    llvm::SmallVector<Node *, 4> out;
    for (Value *v : n->operands())
      if (!llvm::is_contained(out, v->producer()))
        out.push_back(v->producer());
    return out;
  }

  Choice consider(Node *n, unsigned d) {
    Choice c;
    c.device = d;
    c.position = position_[n];
    double at = free_[d];
    llvm::SmallPtrSet<const Value *, 8> seen;
    for (Value *v : n->operands()) {
      Node *p = v->producer();
      double arrives = end_[p];
      unsigned from = device_[p];
      if (from != d && seen.insert(v).second) {
        auto bw = times_.bandwidth(c_.devices()[from].name, c_.devices()[d].name);
        arrives += bw ? times_.copySeconds(v->type().bytes(batch_), *bw)
                      : std::numeric_limits<double>::infinity();
      }
      at = std::max(at, arrives);
    }
    c.start = at;
    c.end = at + times_.kernelSeconds(n->op(), nodeCost(*n, batch_), c_.devices()[d]);
    c.copyBytes = need(n, (int)d) - need(n);
    c.followsLast = !order_.empty() && device_.lookup(order_.back()) == d;
    const int64_t after = live_[d] + need(n, (int)d);
    c.fits = at != std::numeric_limits<double>::infinity() && after <= capacity_[d];
    c.roomAfter = capacity_[d] > 0 ? (double)(capacity_[d] - after) / (double)capacity_[d] : 0;
    return c;
  }

  void place(Node *n, const Choice &c) {
    unsigned d = c.device, grp = groups_.groupOf(n);
    ModelParallelDevice &dev = plan_.devices[d];
    if (groupDevice_[grp] < 0) {
      groupDevice_[grp] = (int)d;
      live_[d] += groupBytes_[grp];
      dev.persistentBytes += groupBytes_[grp];
      held_[d].variables += groupStored_[grp].variables;
      held_[d].slots += groupStored_[grp].slots;
      held_[d].accumulators += groupStored_[grp].accumulators;
    }
    // Operands from other devices arrive as copies held on d until their
    // producer's last consumer is placed (when d's last use is not known).
    for (Node *p : producers(n))
      if (device_[p] != d && copies_.insert({p, d}).second) {
        live_[d] += outBytes_[p];
        held_[d].copies += outBytes_[p];
        copiedTo_[p].push_back(d);
      }
    device_[n] = d;
    order_.push_back(n);
    end_[n] = c.end;
    free_[d] = c.end;
    ++dev.nodes;
    dev.busySeconds += c.end - c.start;
    live_[d] += outBytes_[n];
    dev.peakBytes = std::max(dev.peakBytes, live_[d]);
    // Results whose last consumer this was are freed.
    llvm::SmallPtrSet<Node *, 8> seen;
    for (Value *v : n->operands()) {
      Node *p = v->producer();
      if (seen.insert(p).second && --consumersLeft_[p] == 0) {
        live_[device_[p]] -= outBytes_[p];
        for (unsigned to : copiedTo_[p]) {
          live_[to] -= outBytes_[p];
          held_[to].copies -= outBytes_[p];
        }
      }
    }
    if (consumersLeft_[n] == 0)
      live_[d] -= outBytes_[n];
  }

  /// What `n` lacks on `d`: the bytes it needs there beyond what is free,
  /// or infinity when an operand cannot reach `d` (no link).
  double shortfall(Node *n, unsigned d) {
    if (consider(n, d).start == std::numeric_limits<double>::infinity())
      return std::numeric_limits<double>::infinity();
    return (double)(need(n, (int)d) - (capacity_[d] - live_[d]));
  }

  /// Names the ready node that comes closest to fitting, as a MemoryMisfit
  /// of the scheduler's figures when it stopped: each device holds its
  /// groups' variables, the live results and the copies it received; each
  /// device the node may use would also hold the node's results, copies of
  /// its operands from other devices and its group's variables if not yet
  /// placed, and that is more than it has.
  llvm::Error unplaceable(llvm::ArrayRef<Node *> ready) {
    Node *closest = nullptr;
    double least = std::numeric_limits<double>::infinity();
    for (size_t i : considered(ready))
      for (unsigned d : candidates(ready[i]))
        if (double lacks = shortfall(ready[i], d); !closest || lacks < least)
          closest = ready[i], least = lacks;
    std::vector<MemoryNeed> needs;
    std::vector<std::string> where, unlinked;
    const unsigned grp = groups_.groupOf(closest);
    for (unsigned d = 0; d < c_.devices().size(); ++d) {
      MemoryNeed n = held_[d];
      n.device = c_.devices()[d].name;
      n.kind = c_.devices()[d].kind;
      n.capacity = capacity_[d];
      n.activations = live_[d] - n.stored() - n.copies;
      if (llvm::is_contained(candidates(closest), d)) {
        if (shortfall(closest, d) == std::numeric_limits<double>::infinity()) {
          unlinked.push_back(n.device);
        } else {
          where.push_back(n.device);
          n.activations += outBytes_.lookup(closest);
          n.copies += need(closest, (int)d) - need(closest);
          if (groupDevice_[grp] < 0) {
            n.variables += groupStored_[grp].variables;
            n.slots += groupStored_[grp].slots;
            n.accumulators += groupStored_[grp].accumulators;
          }
        }
      }
      needs.push_back(std::move(n));
    }
    if (where.empty())
      return nodeError(*closest, "cannot be placed model-parallel: an operand has no link to " +
                                     llvm::join(unlinked, ", "));
    std::string at = where.size() == 1 ? where[0] + (groupDevice_[grp] >= 0
                                                         ? ", where its colocation group is, has no"
                                                         : " has no")
                                       : "none of " + llvm::join(where, ", ") + " has";
    std::string headline = "node '" + printable(closest->name(), 256) + "' (" +
                           opName(closest->op()).str() +
                           "): cannot be placed model-parallel: " + at +
                           " room for its results, copies of its operands and its group's "
                           "variables (the scheduler's estimate of what each device holds then)";
    if (!unlinked.empty())
      headline += "; an operand has no link to " + llvm::join(unlinked, ", ");
    auto misfit = std::make_unique<MemoryMisfit>(std::move(headline), std::move(needs));
    misfit->setEstimated();
    return llvm::Error(std::move(misfit));
  }

  static void addStored(MemoryNeed &n, const Variable &v) {
    (v.kind == VarKind::Slot          ? n.slots
     : v.kind == VarKind::Accumulator ? n.accumulators
                                      : n.variables) += v.type.bytes();
  }

  Graph &g_;
  const Cluster &c_;
  const KernelAvailability &kernels_;
  const ModelParallelOptions &o_;
  StepTimeModel times_;
  int64_t batch_;
  ColocationGroups groups_;
  ModelParallelPlan plan_;
  std::vector<int64_t> capacity_, live_, groupBytes_;
  /// What each device holds now by kind (activations: live_ less the rest),
  /// and what each group stores.
  std::vector<MemoryNeed> held_, groupStored_;
  std::vector<double> free_;
  std::vector<int> groupDevice_;
  std::vector<std::vector<unsigned>> groupDevices_;
  llvm::DenseMap<Node *, unsigned> position_, waiting_, device_, consumersLeft_;
  llvm::DenseMap<Node *, int64_t> outBytes_;
  llvm::DenseMap<Node *, double> end_;
  llvm::DenseMap<Node *, std::vector<Node *>> successors_;
  std::vector<Node *> order_; ///< placed, in the order placed
  std::set<std::pair<Node *, unsigned>> copies_; ///< (producer, device holding a copy)
  llvm::DenseMap<Node *, llvm::SmallVector<unsigned, 2>> copiedTo_;
};

} // namespace

llvm::StringRef scheduleOrderName(ScheduleOrder order) {
  return order == ScheduleOrder::EarliestStart ? "m-ETF" : "memory order";
}

llvm::Expected<ModelParallelPlan> placeModelParallel(Module &m, const Cluster &c,
                                                     const KernelAvailability &kernels,
                                                     const ModelParallelOptions &opts) {
  Graph &g = m.main();
  auto groups = ColocationGroups::build(g);
  if (!groups)
    return groups.takeError();
  int64_t batch = opts.batch > 0 ? opts.batch : m.batch().value_or(1);
  Scheduler s(g, c, kernels, opts, batch, std::move(*groups));
  auto plan = s.run();
  if (!plan)
    return plan.takeError();
  // Gradient accumulation's micro-step graph holds main's nodes under their
  // names (passes/AccumulateGradients.h): they run where main's run.
  for (Graph *other : m.graphs())
    if (other != &g)
      for (Node *n : other->nodes())
        if (const Node *twin = g.findNode(n->name()))
          n->setRequestedDevice(twin->requestedDevice());
  return plan;
}

} // namespace graphc
