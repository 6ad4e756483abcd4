//===- CostModel.cpp - FLOPs, traffic and time per device -------------------===//

#include "placement/analysis/CostModel.h"

#include "ir/Cost.h"
#include "ir/Diagnostics.h"
#include "placement/analysis/StepTimeModel.h"

#include "llvm/ADT/StringMap.h"

#include <map>
#include <set>

namespace graphc {

int64_t PlacementCost::totalTrafficBytes() const {
  int64_t total = 0;
  for (const DeviceTraffic &t : traffic)
    total += t.bytes;
  return total;
}

const DeviceCost *PlacementCost::find(llvm::StringRef device) const {
  for (const DeviceCost &d : devices)
    if (d.device == device)
      return &d;
  return nullptr;
}

namespace {

class Estimator {
public:
  Estimator(const Cluster &c, int64_t batch) : c_(c), model_(c), batch_(batch) {
    for (const ClusterDevice &d : c.devices())
      out_.devices.push_back({d.name});
    in_.resize(c.devices().size());
    sent_.resize(c.devices().size());
  }

  llvm::Expected<unsigned> deviceOf(const Node &n) const {
    std::optional<DeviceId> assigned = n.assignedDevice();
    if (!assigned)
      return nodeError(n, "has no assigned device; the cost model needs a placed module");
    if (auto i = c_.indexOf(*assigned))
      return *i;
    return nodeError(n, "is assigned to '" + assigned->str() +
                            "', which is not a device of this cluster; " + c_.visibleDevices());
  }

  /// `bytes` from device `from` to `to`; all-reduce volume counts separately.
  llvm::Error send(unsigned from, unsigned to, int64_t bytes, bool allReduce,
                   double bandwidth = 0) {
    const std::string &a = c_.devices()[from].name, &b = c_.devices()[to].name;
    if (bandwidth <= 0) {
      auto bw = model_.bandwidth(a, b);
      if (!bw)
        return makeError("devices " + a + " and " + b +
                         " exchange data but the cluster has no link between them");
      bandwidth = *bw;
    }
    double seconds = StepTimeModel::bandwidthSeconds(bytes, bandwidth);
    DeviceTraffic &t = traffic_[{from, to}];
    t.from = a;
    t.to = b;
    t.bytes += bytes;
    t.seconds += seconds;
    out_.devices[from].bytesOut += bytes;
    out_.devices[to].bytesIn += bytes;
    if (allReduce)
      out_.devices[from].allReduceBytes += bytes;
    sent_[from] += seconds;
    in_[to] += seconds;
    return llvm::Error::success();
  }

  /// A graph that runs `times` times per step (gradient accumulation's
  /// micro-steps: K − 1; main: 1).
  llvm::Error addGraph(const Graph &g, int64_t times) {
    std::set<std::pair<const Value *, unsigned>> counted;
    for (const Node *n : g.nodes()) {
      auto d = deviceOf(*n);
      if (!d)
        return d.takeError();
      DeviceCost &dc = out_.devices[*d];
      ++dc.nodes;
      dc.flops += times * nodeCost(*n, batch_).flops;
      if (isCollective(n->op())) {
        allReduces_[n->attrs().getString("group")].push_back({n, *d, times});
        continue;
      }
      for (const Value *v : n->operands()) {
        const Node &p = *v->producer();
        if (isCollective(p.op()))
          continue; // a collective delivers on each participant
        auto from = deviceOf(p);
        if (!from)
          return from.takeError();
        if (*from == *d || !counted.insert({v, *d}).second)
          continue;
        if (auto e = send(*from, *d, times * v->type().bytes(batch_), false))
          return e;
      }
    }
    return llvm::Error::success();
  }

  /// Ring all-reduce per group: rank r sends 2·(n−1)/n of its bytes to rank
  /// r+1, at the slowest link of the ring.
  llvm::Error addAllReduces() {
    for (auto &[group, nodes] : allReduces_) {
      std::map<int64_t, unsigned> deviceOfRank;
      int64_t n = 0;
      for (const GroupMember &m : nodes) {
        deviceOfRank.try_emplace(m.node->attrs().getInt("rank"), m.device);
        n = std::max(n, m.node->attrs().getInt("nranks", 1));
      }
      n = std::max<int64_t>(n, deviceOfRank.size());
      if (n <= 1 || deviceOfRank.size() < 2)
        continue;
      std::vector<std::string> ring;
      for (auto &[rank, dev] : deviceOfRank)
        ring.push_back(c_.devices()[dev].name);
      RingLinks links = model_.ringLinks(ring);
      if (links.missing)
        return makeError("all-reduce group '" + group + "': devices " + links.missing->first +
                         " and " + links.missing->second +
                         " are neighbours in the ring but "
                         "the cluster has no link between them");
      const double slowest = links.slowest;
      for (const GroupMember &m : nodes) {
        const Node *a = m.node;
        int64_t bytes = collectiveRingBytes(*a, batch_);
        int64_t volume = m.times * StepTimeModel::ringBytes(bytes, n);
        auto it = deviceOfRank.find(a->attrs().getInt("rank"));
        auto next = std::next(it) == deviceOfRank.end() ? deviceOfRank.begin() : std::next(it);
        if (it->second == next->second || slowest == 0)
          continue;
        if (auto e = send(it->second, next->second, volume, true, slowest))
          return e;
      }
    }
    return llvm::Error::success();
  }

  PlacementCost finish(const std::vector<Variable> &vars, bool overlap) {
    for (const Variable &v : vars)
      for (DeviceId d : v.devices)
        if (auto i = c_.indexOf(d))
          out_.devices[*i].variableBytes += v.bytesOn(d);
    out_.overlap = overlap;
    for (unsigned i = 0; i < out_.devices.size(); ++i) {
      DeviceCost &d = out_.devices[i];
      d.computeSeconds = model_.computeSeconds(d.flops, c_.devices()[i]);
      d.commSeconds = std::max(in_[i], sent_[i]);
      d.stepSeconds =
          overlap ? std::max(d.computeSeconds, d.commSeconds) : d.computeSeconds + d.commSeconds;
      if (out_.slowestDevice.empty() || d.stepSeconds > out_.stepSeconds) {
        out_.stepSeconds = d.stepSeconds;
        out_.slowestDevice = d.device;
      }
    }
    for (auto &[key, t] : traffic_)
      out_.traffic.push_back(t);
    return std::move(out_);
  }

private:
  const Cluster &c_;
  StepTimeModel model_;
  int64_t batch_;
  PlacementCost out_;
  std::vector<double> in_, sent_; ///< seconds per direction, per device
  std::map<std::pair<unsigned, unsigned>, DeviceTraffic> traffic_;
  /// group -> (node, device), graph order
  struct GroupMember {
    const Node *node;
    unsigned device;
    int64_t times;
  };
  std::map<std::string, std::vector<GroupMember>> allReduces_;
};

} // namespace

llvm::Expected<PlacementCost> estimatePlacementCost(const Module &m, const Cluster &c,
                                                    CostOptions opts) {
  int64_t batch = opts.batch > 0 ? opts.batch : m.batch().value_or(1);
  Estimator e(c, batch);
  // A step is an update: main once, gradient accumulation's micro-steps
  // K − 1 times (passes/AccumulateGradients.h).
  const int64_t microSteps = std::max<int64_t>(1, m.plan().accumulate.value_or(1)) - 1;
  for (const Graph *g : m.graphs())
    if (auto err = e.addGraph(*g, g->name() == "main" ? 1 : microSteps))
      return err;
  if (auto err = e.addAllReduces())
    return err;
  return e.finish(m.variables(), opts.overlapCommunication);
}

} // namespace graphc
