//===- ModelParallel.cpp - List schedules over colocation groups ----------===//

#include "placement/ModelParallel.h"

#include "ir/Diagnostics.h"
#include "ir/MemoryLimit.h"
#include "placement/ColocationGroups.h"
#include "placement/analysis/MemoryNeeds.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
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
    bool preferred = false;   ///< the device of the node's forward segment
    /// m-ETF: earliest start, then earliest end; a tie (variables, free at
    /// any time) goes to the device with the most memory to spare, so that
    /// the devices fill evenly instead of the first one filling up.
    /// Memory order: first the fewest bytes copied (a chain stays on its
    /// device, and a copy held until its producer's last use elsewhere is
    /// what spreading costs), then the device of the node before (a
    /// variable goes where its consumer runs), then as m-ETF. Segmented
    /// memory order: the same after the GPU of the node's forward segment.
    bool better(const Choice &o, ScheduleOrder order) const {
      if (order != ScheduleOrder::EarliestStart) {
        if (preferred != o.preferred)
          return preferred;
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
    if (o_.order == ScheduleOrder::SegmentedMemoryOrder)
      cutForward();
    return llvm::Error::success();
  }

  /// Segmented memory order: the forward pass (graph order, sources aside)
  /// cut into contiguous segments, one per GPU in cluster order. A segment's
  /// device holds what the backward reads of it (and its variables) until
  /// its backward, and there, at each node's gradient, also about two
  /// results of that node's size; besides, what crosses its ends: the
  /// copies it receives and the gradient of what it sent (the values it
  /// sends on are freed once copied: PlanInfo::releaseSent). The
  /// cuts make the largest ratio of that estimate to a device's memory as
  /// small as they can (bisection on the ratio; for each, which segment
  /// ends each segment can reach: O(GPUs · nodes²) at worst).
  void cutForward() {
    // The backward pass: the loss gradients and their descendants (as
    // passes/Recompute.h's backwardNodes).
    llvm::DenseSet<Node *> backward;
    for (Node *n : g_.nodes())
      if (n->op() == Op::SoftmaxCrossEntropyGrad || llvm::any_of(n->operands(), [&](Value *v) {
            return backward.contains(v->producer());
          }))
        backward.insert(n);
    std::vector<unsigned> gpus;
    for (unsigned d = 0; d < c_.devices().size(); ++d)
      if (!c_.devices()[d].id.isHost() && capacity_[d] > 0)
        gpus.push_back(d);
    if (gpus.size() < 2)
      return;
    std::vector<Node *> chain;
    llvm::DenseMap<Node *, size_t> index;
    for (Node *n : g_.nodes())
      if (!backward.contains(n) && n->op() != Op::Variable && n->op() != Op::Constant &&
          n->op() != Op::Input) {
        index[n] = chain.size();
        chain.push_back(n);
      }
    const size_t N = chain.size();
    if (N < gpus.size() || backward.empty())
      return;
    // saved[i]: what chain[0..i] leaves for the backward (and the variables
    // first read there); crossing[i]: bytes produced at or before i and read
    // after i in the forward.
    std::vector<double> saved(N), crossing(N, 0);
    std::vector<bool> counted(groups_.numGroups(), false);
    double total = 0;
    for (size_t i = 0; i < N; ++i) {
      Node *n = chain[i];
      size_t last = i;
      bool read = false;
      for (Node *s : successors_[n]) {
        read |= backward.contains(s);
        if (auto it = index.find(s); it != index.end())
          last = std::max(last, it->second);
      }
      total += read ? (double)outBytes_[n] : 0;
      for (Value *v : n->operands())
        if (v->producer()->op() == Op::Variable) {
          unsigned grp = groups_.groupOf(v->producer());
          if (!counted[grp]) {
            counted[grp] = true;
            total += (double)groupBytes_[grp];
          }
        }
      saved[i] = total;
      crossing[i] += (double)outBytes_[n]; // counted from i up to its last reader
      crossing[last] -= (double)outBytes_[n];
    }
    for (size_t i = 1; i < N; ++i)
      crossing[i] += crossing[i - 1];
    // The cuts (the last node of each segment but the last) when each
    // segment may hold `ratio` of its device's memory, the last devices
    // idle when the rest fits on one before; {N} when none fit.
    // reach[k][i]: 1 + the start of a segment k that ends at node i, the
    // segments before it reaching that start (0: none).
    auto cutsAt = [&](double ratio) {
      const size_t K = gpus.size();
      std::vector<std::vector<size_t>> reach(K, std::vector<size_t>(N, 0));
      for (size_t k = 0; k < K; ++k) {
        const double room = ratio * (double)capacity_[gpus[k]];
        for (size_t from = 0; from < N; ++from) {
          if (k == 0 ? from != 0 : (from == 0 || !reach[k - 1][from - 1]))
            continue;
          const double before = from ? saved[from - 1] : 0, in = from ? crossing[from - 1] : 0;
          double body = 0;
          for (size_t i = from; i < N; ++i) {
            body = std::max(body, saved[i] - before + 2 * (double)outBytes_[chain[i]]);
            if (body + in > room)
              break;
            const double out = i + 1 < N ? crossing[i] : 0;
            if (std::max(body, saved[i] - before + out) + in <= room && !reach[k][i])
              reach[k][i] = from + 1;
          }
        }
        if (reach[k][N - 1]) { // the rest fits here: the remaining devices idle
          std::vector<size_t> cuts;
          for (size_t j = k, end = N - 1; j > 0; --j) {
            end = reach[j][end] - 2; // the previous segment's last node
            cuts.insert(cuts.begin(), end);
          }
          return cuts;
        }
      }
      return std::vector<size_t>{N};
    };
    auto fits = [&](const std::vector<size_t> &cuts) { return cuts.empty() || cuts[0] != N; };
    double lo = 0, hi = 1;
    while (!fits(cutsAt(hi)) && hi < 64)
      hi *= 2;
    if (!fits(cutsAt(hi)))
      return;
    for (int step = 0; step < 20; ++step) {
      double mid = (lo + hi) / 2;
      (fits(cutsAt(mid)) ? hi : lo) = mid;
    }
    std::vector<size_t> cuts = cutsAt(hi);
    size_t segment = 0;
    for (size_t i = 0; i < N; ++i) {
      preferred_[chain[i]] = gpus[segment] + 1;
      if (segment < cuts.size() && i == cuts[segment])
        ++segment;
    }
    // A variable (and its group) goes with its first reader.
    for (Node *n : g_.nodes())
      if (n->op() == Op::Variable) {
        size_t first = N;
        for (Node *s : successors_[n])
          if (auto it = index.find(s); it != index.end())
            first = std::min(first, it->second);
        if (first < N)
          preferred_[n] = preferred_[chain[first]];
      }
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
    c.preferred = preferred_.lookup(n) == d + 1;
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
  /// Segmented memory order: the device + 1 of each forward node's segment
  /// and of each variable's first reader's.
  llvm::DenseMap<Node *, unsigned> preferred_;
};

} // namespace

llvm::StringRef scheduleOrderName(ScheduleOrder order) {
  switch (order) {
  case ScheduleOrder::EarliestStart:
    return "m-ETF";
  case ScheduleOrder::MemoryOrder:
    return "memory order";
  case ScheduleOrder::SegmentedMemoryOrder:
    return "segmented memory order";
  }
  return "";
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
