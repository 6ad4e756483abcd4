#include "placement/analysis/StepSimulator.h"

#include "ir/Cost.h"
#include "ir/Diagnostics.h"
#include "placement/analysis/Schedule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <map>
#include <optional>
#include <queue>

namespace graphc {

namespace {

bool onCommStream(const Node &n) {
  return isCommunication(n.op());
}

class Simulator {
public:
  Simulator(const Cluster &c, const SimOptions &o, int64_t batch)
      : c_(c), o_(o), times_(c, o.times), batch_(batch) {}

  llvm::Error run(const Graph &g) {
    auto s = buildSchedule(g, [](const Node &n) { return deviceText(n.assignedDevice()); });
    if (!s)
      return s.takeError();
    s_ = std::move(*s);
    for (const std::string &d : s_.devices) {
      const ClusterDevice *dev = c_.find(d);
      if (!dev)
        return makeError("device '" + d + "' runs nodes but is not in the plan's cluster; " +
                         c_.visibleDevices());
      devs_.push_back(dev);
      out_.devices.push_back({d});
    }
    queues_.assign(s_.devices.size() * 2, {});
    heads_.assign(queues_.size(), 0);
    free_.assign(queues_.size(), 0.0);
    coreWait_.assign(queues_.size(), {0.0, nullptr});
    shareHostCores();
    for (unsigned d = 0; d < s_.devices.size(); ++d)
      for (const Node *n : s_.order[d]) {
        auto dur = duration(*n, d);
        if (!dur)
          return dur.takeError();
        duration_[n] = *dur;
        for (const Node *p : s_.predecessors(n))
          successors_[p].push_back(n);
        waiting_[n] = (unsigned)s_.predecessors(n).size();
        if (isCollective(n->op()))
          groups_[n->attrs().getString("group")].push_back(n);
        if (*dur > 0 || onCommStream(*n))
          queues_[onCommStream(*n) ? commQueue(d) : 2 * d].push_back(n);
        else
          costless_.insert(n);
      }
    // Costless nodes without predecessors (sources) are done at time 0.
    for (const Node *n : costless_)
      if (waiting_[n] == 0)
        finishCostless(n);
    return drain();
  }

  SimResult result() && {
    const Node *last = nullptr;
    for (auto &[n, e] : end_)
      if (!last || e > end_[last] || (e == end_[last] && s_.position[n] > s_.position[last]))
        last = n;
    out_.stepSeconds = last ? end_[last] : 0;
    for (const Node *n = last; n; n = heldBy_.lookup(n))
      if (!costless_.count(n))
        out_.criticalPath.push_back(
            {n, s_.devices[s_.deviceOf[n]], end_[n] - duration_[n], end_[n], kindOf(*n)});
    std::reverse(out_.criticalPath.begin(), out_.criticalPath.end());
    return std::move(out_);
  }

private:
  static llvm::StringRef kindOf(const Node &n) {
    return n.op() == Op::Transfer    ? "transfer"
           : n.op() == Op::AllReduce ? "all-reduce"
           : isCollective(n.op())    ? "collective"
                                     : "compute";
  }

  llvm::Expected<double> duration(const Node &n, unsigned d) {
    const ClusterDevice &dev = *devs_[d];
    if (n.op() == Op::Transfer) {
      std::optional<DeviceId> from = n.operand(0)->producer()->assignedDevice();
      if (from == dev.id)
        return 0.0;
      const ClusterDevice *src = from ? c_.find(*from) : nullptr;
      auto bw = src ? times_.bandwidth(src->name, dev.name) : std::nullopt;
      if (!bw)
        return nodeError(n, "copies from " + deviceText(from) + " to " + dev.name +
                                " but the cluster has no link between them");
      return times_.copySeconds(n.operand(0)->type().bytes(batch_), *bw);
    }
    if (isCollective(n.op()))
      return 0.0; // decided with its group, when every rank is ready
    double seconds = times_.kernelSeconds(n.op(), nodeCost(n, batch_), dev);
    if (threads_[d] == 0 || seconds == 0)
      return seconds;
    // Measured with the calibration's threads, run with the executor's; the
    // cores are held for the work at full speed (a slower emulated device
    // sleeps the rest without them).
    const KindCalibration &k = c_.calibration(dev.kind);
    double work = (seconds - k.launchSeconds) * k.threads / threads_[d];
    coreSeconds_[&n] = k.launchSeconds + work * dev.relativeSpeed;
    return k.launchSeconds + work;
  }

  /// A device's copies and collectives: a stream of their own beside its
  /// kernels, but an emulated device's one thread does both in turn.
  unsigned commQueue(unsigned d) const { return threads_[d] ? 2 * d : 2 * d + 1; }

  /// Devices calibrated as emulated on the host's cores share them as the
  /// executor shares them: each gets its part of the threads and holds them
  /// while a kernel runs.
  void shareHostCores() {
    threads_.assign(s_.devices.size(), 0);
    auto emulated = [&](llvm::StringRef d) {
      const ClusterDevice *dev = c_.find(d);
      return dev && c_.calibration(dev->kind).emulated();
    };
    for (DeviceKind t : {DeviceKind::CPU, DeviceKind::GPU})
      if (c_.calibration(t).emulated())
        cores_ = std::max(cores_, c_.calibration(t).cores);
    if (cores_ == 0)
      return;
    int each = cpuDeviceThreads(s_, s_.devices, emulated, (int)cores_);
    for (unsigned d = 0; d < s_.devices.size(); ++d)
      threads_[d] = emulated(s_.devices[d]) ? (unsigned)each : 0;
  }

  /// When every predecessor of `n` has finished: the latest of their ends,
  /// and which one it was.
  std::pair<double, const Node *> ready(const Node *n) {
    double at = 0;
    const Node *by = nullptr;
    for (const Node *p : s_.predecessors(n))
      if (end_[p] > at || !by) {
        at = std::max(at, end_[p]);
        by = p;
      }
    return {at, by};
  }

  void finish(const Node *n, double start, const Node *by) {
    end_[n] = start + duration_[n];
    if (by)
      heldBy_[n] = by;
    unsigned d = s_.deviceOf[n];
    SimDevice &dev = out_.devices[d];
    if (onCommStream(*n)) {
      ++dev.copies;
      dev.commSeconds += duration_[n];
    } else if (!costless_.count(n)) {
      ++dev.kernels;
      dev.computeSeconds += duration_[n];
    }
    if (!costless_.count(n))
      out_.timeline.push_back({n, dev.device, start, end_[n], kindOf(*n)});
    dev.finishSeconds = std::max(dev.finishSeconds, end_[n]);
    for (const Node *succ : successors_[n])
      if (--waiting_[succ] == 0 && costless_.count(succ))
        finishCostless(succ);
  }

  void finishCostless(const Node *n) {
    auto [at, by] = ready(n);
    finish(n, at, by);
  }

  /// When the head of stream q can start, and what holds it until then;
  /// nothing while it waits on a node not yet started.
  std::optional<std::pair<double, const Node *>> headStart(unsigned q) {
    if (heads_[q] >= queues_[q].size())
      return std::nullopt;
    const Node *n = queues_[q][heads_[q]];
    if (waiting_[n] != 0)
      return std::nullopt;
    if (isCollective(n->op()))
      return collectiveStart(n);
    auto [at, by] = ready(n);
    if (heads_[q] && free_[q] > at) {
      at = free_[q];
      by = queues_[q][heads_[q] - 1];
    }
    if (coreWait_[q].first > at)
      return coreWait_[q];
    return std::make_pair(at, by);
  }

  /// Every rank of n's group at the head of its stream with its operands
  /// ready: they start together, at the latest of them.
  std::optional<std::pair<double, const Node *>> collectiveStart(const Node *n) {
    std::vector<const Node *> &ranks = groups_[n->attrs().getString("group")];
    double start = 0;
    const Node *by = nullptr;
    for (const Node *r : ranks) {
      unsigned q = commQueue(s_.deviceOf[r]);
      // Two ranks on one device sit one after the other in its stream.
      unsigned at = heads_[q];
      while (at < queues_[q].size() && queues_[q][at] != r &&
             llvm::is_contained(ranks, queues_[q][at]))
        ++at;
      if (at >= queues_[q].size() || queues_[q][at] != r || waiting_[r] != 0)
        return std::nullopt;
      if (at != heads_[q] && !llvm::is_contained(ranks, queues_[q][heads_[q]]))
        return std::nullopt;
      auto [ready_, held] = ready(r);
      double when = std::max(ready_, free_[q]);
      if (when > start || !by) {
        start = std::max(start, when);
        by = when == ready_ ? held : (heads_[q] ? queues_[q][heads_[q] - 1] : held);
      }
    }
    return std::make_pair(start, by);
  }

  void startCollective(const Node *n, double start, const Node *by) {
    std::vector<const Node *> &ranks = groups_[n->attrs().getString("group")];
    double seconds = collectiveSeconds(ranks);
    for (const Node *r : ranks) {
      duration_[r] = seconds;
      finish(r, start, by);
    }
    for (const Node *r : ranks) {
      unsigned q = commQueue(s_.deviceOf[r]);
      free_[q] = start + seconds;
      while (heads_[q] < queues_[q].size() && llvm::is_contained(ranks, queues_[q][heads_[q]]))
        ++heads_[q];
    }
  }

  /// A group's all-reduce: the ring over its devices, then across the workers.
  double collectiveSeconds(llvm::ArrayRef<const Node *> ranks) {
    std::map<int64_t, std::string> deviceOfRank;
    int64_t bytes = 0;
    for (const Node *r : ranks) {
      deviceOfRank.try_emplace(r->attrs().getInt("rank"), deviceText(r->assignedDevice()));
      bytes = std::max(bytes, collectiveRingBytes(*r, batch_));
    }
    int64_t n =
        std::max<int64_t>(ranks.front()->attrs().getInt("nranks", 1), (int64_t)deviceOfRank.size());
    double across = 0;
    if (o_.workers > 1)
      across = StepTimeModel::ringSeconds(bytes, o_.workers, o_.networkBandwidth,
                                          o_.networkLatencySeconds);
    if (deviceOfRank.size() < 2)
      return across;
    std::vector<std::string> ring;
    for (auto &[rank, device] : deviceOfRank)
      ring.push_back(device);
    // Neighbours without a link are not timed (estimatePlacementCost refuses such a ring).
    double slowest = times_.ringLinks(ring).slowest;
    if (slowest == 0)
      return across;
    return times_.ringSeconds(bytes, (double)n, slowest) + across;
  }

  /// Starts the stream heads in time order, the earliest first. On devices
  /// emulated on the host's cores a kernel also needs its device's threads
  /// free (the executor's core budget): it waits for the running kernel
  /// that frees them first.
  llvm::Error drain() {
    for (;;) {
      int best = -1;
      std::pair<double, const Node *> at;
      for (unsigned q = 0; q < queues_.size(); ++q)
        if (auto s = headStart(q); s && (best < 0 || s->first < at.first)) {
          best = (int)q;
          at = *s;
        }
      if (best < 0)
        break;
      unsigned q = (unsigned)best;
      const Node *n = queues_[q][heads_[q]];
      if (isCollective(n->op())) {
        startCollective(n, at.first, at.second);
        continue;
      }
      // A kernel holds its device's threads; a copy (on the device's own
      // thread) one core.
      if (unsigned need = onCommStream(*n) ? 1 : threads_[q / 2]; threads_[q / 2] && need) {
        while (!running_.empty() && running_.top().end <= at.first) {
          coresBusy_ -= running_.top().cores;
          running_.pop();
        }
        if (coresBusy_ + need > cores_ && !running_.empty()) {
          coreWait_[q] = {running_.top().end, running_.top().node};
          continue;
        }
        auto held = coreSeconds_.find(n);
        running_.push(
            {at.first + (held != coreSeconds_.end() ? held->second : duration_[n]), need, n});
        coresBusy_ += need;
      }
      finish(n, at.first, at.second);
      free_[q] = end_[n];
      coreWait_[q] = {0.0, nullptr};
      ++heads_[q];
    }
    for (unsigned q = 0; q < queues_.size(); ++q)
      if (heads_[q] < queues_[q].size()) {
        const Node *n = queues_[q][heads_[q]];
        return nodeError(*n, "never starts in the simulation: its device's " +
                                 std::string(q % 2 ? "communication" : "compute") +
                                 " stream waits on it, and it waits on a node that cannot run "
                                 "before it (a collective whose ranks are issued in different "
                                 "orders?)");
      }
    return llvm::Error::success();
  }

  const Cluster &c_;
  SimOptions o_;
  StepTimeModel times_;
  int64_t batch_;
  Schedule s_;
  std::vector<const ClusterDevice *> devs_;
  std::vector<std::vector<const Node *>> queues_; ///< 2d: compute, 2d+1: comm
  std::vector<size_t> heads_;
  std::vector<double> free_;
  /// Host cores shared by emulated devices (0: none): each device's threads,
  /// the kernels holding them (the earliest to end on top), a stream's head
  /// waiting for them (until when, for whose end).
  struct Running {
    double end;
    unsigned cores;
    const Node *node;
    bool operator>(const Running &o) const { return end > o.end; }
  };
  unsigned cores_ = 0, coresBusy_ = 0;
  std::vector<unsigned> threads_;
  std::priority_queue<Running, std::vector<Running>, std::greater<Running>> running_;
  std::vector<std::pair<double, const Node *>> coreWait_;
  llvm::DenseMap<const Node *, double> coreSeconds_;
  llvm::DenseMap<const Node *, double> duration_, end_;
  llvm::DenseMap<const Node *, const Node *> heldBy_;
  llvm::DenseMap<const Node *, unsigned> waiting_;
  llvm::DenseMap<const Node *, std::vector<const Node *>> successors_;
  llvm::DenseSet<const Node *> costless_;
  std::map<std::string, std::vector<const Node *>> groups_;
  SimResult out_;
};

} // namespace

llvm::Expected<SimResult> simulateStep(const Module &runnable, const Cluster &cluster,
                                       const SimOptions &opts) {
  int64_t batch = opts.batch > 0 ? opts.batch : runnable.batch().value_or(1);
  Simulator sim(cluster, opts, batch);
  const Graph *g = runnable.findGraph(opts.graph);
  if (!g)
    return makeError("module '" + runnable.name() + "' has no graph '" + opts.graph + "'");
  if (auto e = sim.run(*g))
    return e;
  return std::move(sim).result();
}

} // namespace graphc
