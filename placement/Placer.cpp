//===- Placer.cpp - Requests, colocation, kernels, towers, neighbours -------===//
//
// One GraphPlacer per graph works on colocation groups in four rounds, each
// deciding the groups the previous ones left open: requests (contract 3, 4),
// towers (5), producers in graph order then consumers in reverse graph order
// (6), the host. Per-node reasons are written at the end: a node that asked
// for its device says "requested", a node that went along with another member
// of its group says which one.
//
//===----------------------------------------------------------------------===//

#include "placement/Placer.h"

#include "placement/ColocationGroups.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <map>

namespace graphc {

bool anyKernelAnywhere(const Node &, DeviceKind) {
  return true;
}

bool runsWithoutKernel(Op op) {
  switch (op) {
  case Op::Input:
  case Op::Variable:
  case Op::Constant:
  case Op::Transfer:
    return true;
  default:
    return isCollective(op);
  }
}

namespace {

constexpr unsigned kAllKinds = 3;
unsigned kindBit(DeviceKind t) {
  return t == DeviceKind::GPU ? 2u : 1u;
}

std::string kindList(unsigned kinds) {
  std::vector<std::string> names;
  for (DeviceKind t : {DeviceKind::CPU, DeviceKind::GPU})
    if (kinds & kindBit(t))
      names.push_back(deviceKindName(t).str());
  return names.empty() ? "none" : llvm::join(names, ", ");
}

std::string quoted(const Node &n) {
  return "'" + n.name() + "' (" + opName(n.op()).str() + ")";
}

llvm::Error cannotAssign(const Node &n, const llvm::Twine &msg) {
  return makeError("Cannot assign a device for operation " + quoted(n) + ": " + msg);
}

/// What a group asked for and what it got.
struct GroupPlan {
  std::optional<DeviceId> requested;      ///< none: no request
  const Node *requester = nullptr;        ///< null when storage asked
  const std::string *storageOf = nullptr; ///< the variable whose storage asked
  unsigned kinds = kAllKinds;
  const Node *limiting = nullptr; ///< first member that ruled a kind out
  int tower = -1;
  const ClusterDevice *device = nullptr;
  std::string reason;
  bool followsRequest = false; ///< reason is "colocated with <requestedBy()>"

  /// "'x' (Op)" or "the storage of variable 'w'" (worded when needed).
  std::string requestedBy() const { return requestedByText(requester, storageOf); }
  static std::string requestedByText(const Node *n, const std::string *var) {
    return n ? quoted(*n) : "the storage of variable '" + *var + "'";
  }
};

class GraphPlacer {
public:
  GraphPlacer(Graph &g, const Cluster &c, const KernelAvailability &k, PlacerOptions o,
              ColocationGroups groups)
      : g_(g), c_(c), kernels_(k), opts_(o), groups_(std::move(groups)),
        plans_(groups_.numGroups()), batch_(g.module().batch().value_or(1)) {}

  llvm::Error run() {
    for (unsigned gi = 0; gi < plans_.size(); ++gi)
      if (auto e = collect(gi))
        return e;
    computeTowerDevices();
    for (unsigned gi = 0; gi < plans_.size(); ++gi)
      if (auto e = decideByRequestOrTower(gi))
        return e;
    for (unsigned gi = 0; gi < plans_.size(); ++gi)
      decideInput(gi);
    for (unsigned gi = 0; gi < plans_.size(); ++gi)
      decideByNeighbours(gi, /*producers=*/true);
    for (unsigned gi = plans_.size(); gi-- > 0;)
      decideByNeighbours(gi, /*producers=*/false);
    for (GroupPlan &p : plans_)
      if (!p.device) {
        const ClusterDevice *d = fallbackDevice(p);
        decide(p, d,
               d == &c_.host() ? "no request, tower or placed neighbour: the host"
                               : "no request, tower or placed neighbour: the first device that "
                                 "can run it");
      }
    for (GroupPlan &p : plans_)
      if (!p.device)
        return cannotAssign(*groups_.members(&p - plans_.data())[0],
                            "no device of a kind that can run it (" + kindList(p.kinds) +
                                ") in this cluster; " + c_.visibleDevices());
    writeBack();
    return writeVariableDevices();
  }

private:
  std::string colocationNote(unsigned gi) const {
    std::vector<std::string> why = groups_.why(gi);
    if (why.empty())
      return "";
    std::string s = "; colocated because ";
    for (unsigned i = 0; i < why.size() && i < 4; ++i)
      s += (i ? ", " : "") + why[i];
    if (why.size() > 4)
      s += ", and " + std::to_string(why.size() - 4) + " more";
    return s;
  }

  /// A request for `device` by node `by`, or (by null) by the storage of
  /// variable `var`.
  llvm::Error request(unsigned gi, DeviceId device, const Node *by, const std::string *var,
                      const Node &blame) {
    GroupPlan &p = plans_[gi];
    if (!c_.find(device)) {
      std::string byText = GroupPlan::requestedByText(by, var);
      if (auto e = c_.checkDevice(device, by ? "requested device" : byText + ": device"))
        return cannotAssign(blame, llvm::toString(std::move(e)));
    }
    if (!p.requested) {
      p.requested = device;
      p.requester = by;
      p.storageOf = var;
      return llvm::Error::success();
    }
    if (p.requested == device)
      return llvm::Error::success();
    std::string byText = GroupPlan::requestedByText(by, var);
    std::string who =
        by ? "it requested '" + device.str() + "'" : byText + " is on '" + device.str() + "'";
    return cannotAssign(blame, who + ", but it must be colocated with " + p.requestedBy() +
                                   (p.requester ? ", which requested '" : ", which is on '") +
                                   p.requested->str() + "'" + colocationNote(gi));
  }

  llvm::Error collect(unsigned gi) {
    GroupPlan &p = plans_[gi];
    std::vector<std::string> kindsOfMembers;
    for (const Node *n : groups_.members(gi)) {
      if (n->tower() >= 0 && (p.tower < 0 || n->tower() < p.tower))
        p.tower = n->tower();
      if (std::optional<DeviceId> requested = n->requestedDevice())
        if (auto e = request(gi, *requested, n, nullptr, *n))
          return e;
      if (runsWithoutKernel(n->op()))
        continue;
      unsigned mine = 0;
      for (DeviceKind t : {DeviceKind::CPU, DeviceKind::GPU})
        if (kernels_(*n, t))
          mine |= kindBit(t);
      if (mine == 0)
        return cannotAssign(*n, "no device kind has a kernel for it (cpu, gpu: none); " +
                                    c_.visibleDevices());
      if (mine != kAllKinds)
        kindsOfMembers.push_back(quoted(*n) + " runs on " + kindList(mine));
      if ((p.kinds & mine) != p.kinds && !p.limiting)
        p.limiting = n;
      p.kinds &= mine;
      if (!p.kinds)
        return cannotAssign(*n, "no device kind can run every member of its colocation group: " +
                                    llvm::join(kindsOfMembers, "; ") + colocationNote(gi));
    }
    const Module &m = g_.module();
    for (const VariableReplica &r : groups_.storage(gi)) {
      const Variable *v = m.findVariable(r.var);
      if (v->devices.empty())
        continue;
      const Node &blame = *groups_.members(gi)[0];
      if (auto e = request(gi, v->devices[r.replica], nullptr, &r.var, blame))
        return e;
    }
    return llvm::Error::success();
  }

  /// Tower t's device: the one its nodes request most (ties: cluster order),
  /// else "gpu:t".
  void computeTowerDevices() {
    // counts[t]: requests per device by tower t's nodes (empty: no node).
    std::vector<std::vector<unsigned>> counts;
    std::vector<bool> seen;
    // Requests repeat a few devices: look each up once.
    std::map<DeviceId, std::optional<unsigned>> indexOf;
    for (const Node *n : g_.nodes()) {
      if (n->tower() < 0)
        continue;
      if ((size_t)n->tower() >= counts.size()) {
        counts.resize(n->tower() + 1);
        seen.resize(n->tower() + 1);
      }
      seen[n->tower()] = true;
      auto &count = counts[n->tower()];
      count.resize(c_.devices().size());
      std::optional<DeviceId> requested = n->requestedDevice();
      if (!requested)
        continue;
      auto [it, inserted] = indexOf.try_emplace(*requested);
      if (inserted)
        it->second = c_.indexOf(*requested);
      if (it->second)
        ++count[*it->second];
    }
    for (int tower = 0; tower < (int)counts.size(); ++tower) {
      if (!seen[tower])
        continue;
      const std::vector<unsigned> &count = counts[tower];
      auto best = std::max_element(count.begin(), count.end()); // first maximum
      if (best != count.end() && *best > 0)
        towerDevice_[tower] = &c_.devices()[best - count.begin()];
      else if (const ClusterDevice *d = c_.find(DeviceId::gpu((unsigned)tower)))
        towerDevice_[tower] = d;
    }
  }

  bool canRun(const GroupPlan &p, const ClusterDevice &d) const {
    return p.kinds & kindBit(d.kind);
  }

  /// The host when it can run the group, else the first device that can.
  const ClusterDevice *fallbackDevice(const GroupPlan &p) const {
    for (const ClusterDevice &d : c_.devices())
      if (canRun(p, d))
        return &d;
    return nullptr;
  }

  void decide(GroupPlan &p, const ClusterDevice *d, std::string reason) {
    p.device = d;
    p.reason = std::move(reason);
  }

  /// "no gpu kernel for Softmax", naming the member when the group has several.
  std::string noKernel(const GroupPlan &p, const ClusterDevice &d) const {
    const Node &n = *p.limiting;
    bool alone = groups_.members(groups_.groupOf(&n)).size() == 1;
    return "no " + deviceKindName(d.kind).str() + " kernel for " +
           (alone ? opName(n.op()).str() : quoted(n));
  }

  llvm::Error decideByRequestOrTower(unsigned gi) {
    GroupPlan &p = plans_[gi];
    if (p.requested) {
      const ClusterDevice &d = *c_.find(*p.requested);
      if (canRun(p, d)) {
        decide(p, &d, "requested");
        p.followsRequest = true;
        return llvm::Error::success();
      }
      const ClusterDevice *other = fallbackDevice(p);
      if (!opts_.softPlacement || !other) {
        std::vector<std::string> could;
        for (const ClusterDevice &x : c_.devices())
          if (canRun(p, x))
            could.push_back(x.name);
        return cannotAssign(*p.limiting,
                            "it is requested on '" + d.name + "'" +
                                (p.requester == p.limiting ? "" : " (by " + p.requestedBy() + ")") +
                                " but has no " + deviceKindName(d.kind) +
                                " kernel; devices that could run it: " +
                                (could.empty() ? "none" : llvm::join(could, ", ")) +
                                (opts_.softPlacement ? "" : " (soft placement is off)"));
      }
      decide(p, other, "requested " + d.name + ", but " + noKernel(p, d) + ": " + other->name);
      return llvm::Error::success();
    }
    if (p.tower < 0)
      return llvm::Error::success();
    auto it = towerDevice_.find(p.tower);
    if (it == towerDevice_.end())
      return llvm::Error::success();
    const ClusterDevice &d = *it->second;
    std::string tower = "tower " + std::to_string(p.tower);
    if (canRun(p, d))
      decide(p, &d, tower);
    else if (const ClusterDevice *other = fallbackDevice(p))
      decide(p, other, tower + " is on " + d.name + ", but " + noKernel(p, d) + ": " + other->name);
    return llvm::Error::success();
  }

  /// Contract 6: the executor feeds inputs from host memory.
  void decideInput(unsigned gi) {
    GroupPlan &p = plans_[gi];
    if (p.device ||
        !llvm::any_of(groups_.members(gi), [](const Node *n) { return n->op() == Op::Input; }))
      return;
    if (canRun(p, c_.host()))
      decide(p, &c_.host(), "an input: fed on the host");
  }

  /// Contract 6: weigh the placed neighbours of a group by bytes.
  void decideByNeighbours(unsigned gi, bool producers) {
    GroupPlan &p = plans_[gi];
    if (p.device)
      return;
    struct Weight {
      int64_t bytes = 0;
      int64_t biggest = -1;
      std::string neighbour; ///< the biggest contributor, lexically first on ties
    };
    std::vector<Weight> weights(c_.devices().size());
    auto add = [&](const Node &other, const Value &v) {
      unsigned og = groups_.groupOf(&other);
      if (og == gi || !plans_[og].device)
        return;
      Weight &w = weights[*c_.indexOf(plans_[og].device->name)];
      int64_t bytes = v.type().bytes(batch_);
      w.bytes += bytes;
      if (bytes > w.biggest || (bytes == w.biggest && other.name() < w.neighbour)) {
        w.biggest = bytes;
        w.neighbour = other.name();
      }
    };
    for (const Node *n : groups_.members(gi)) {
      if (producers) {
        for (const Value *v : n->operands())
          add(*v->producer(), *v);
      } else {
        for (const auto &r : n->results()) {
          llvm::SmallVector<const Node *, 4> users(r->users().begin(), r->users().end());
          llvm::sort(users, [&](const Node *a, const Node *b) {
            return groups_.position(a) < groups_.position(b);
          });
          users.erase(std::unique(users.begin(), users.end()), users.end());
          for (const Node *u : users)
            add(*u, *r);
        }
      }
    }
    int best = -1, bestRunnable = -1;
    for (unsigned i = 0; i < weights.size(); ++i) {
      if (weights[i].biggest < 0)
        continue;
      if (best < 0 || weights[i].bytes > weights[best].bytes)
        best = i;
      if (canRun(p, c_.devices()[i]) &&
          (bestRunnable < 0 || weights[i].bytes > weights[bestRunnable].bytes))
        bestRunnable = i;
    }
    if (best < 0)
      return;
    std::string neighbour = (producers ? "input '" : "consumer '") + weights[best].neighbour + "'";
    const ClusterDevice &d = c_.devices()[best];
    if (best == bestRunnable) {
      decide(p, &d, "follows its " + neighbour + " (" + d.name + ")");
      return;
    }
    const ClusterDevice *other =
        bestRunnable >= 0 ? &c_.devices()[bestRunnable] : fallbackDevice(p);
    decide(p, other,
           neighbour + " is on " + d.name + ", but " + noKernel(p, d) + ": " + other->name);
  }

  void writeBack() {
    unsigned position = 0;
    for (Node *n : g_.nodes()) {
      const GroupPlan &p = plans_[groups_.groupAt(position++)];
      n->setAssignedDevice(p.device->id);
      if (p.followsRequest && n->requestedDevice() != p.device->id)
        n->setPlacementReason("colocated with " + p.requestedBy());
      else
        n->setPlacementReason(p.reason);
    }
  }

  llvm::Error writeVariableDevices() {
    Module &m = g_.module();
    // Replicas in module variable order, so errors come in a stable order.
    llvm::StringMap<std::vector<std::pair<unsigned, const ClusterDevice *>>> placed;
    for (unsigned gi = 0; gi < plans_.size(); ++gi)
      for (const VariableReplica &r : groups_.storage(gi))
        placed[r.var].emplace_back(r.replica, plans_[gi].device);
    for (Variable &v : m.variables()) {
      auto it = placed.find(v.name);
      if (it == placed.end())
        continue;
      std::vector<DeviceId> devices = v.devices;
      if (devices.empty())
        devices.resize(1);
      for (auto &[replica, device] : it->second)
        devices[replica] = device->id;
      for (unsigned i = 0; i < devices.size(); ++i)
        for (unsigned j = i + 1; j < devices.size(); ++j)
          if (devices[i] == devices[j])
            return makeError("variable '" + v.name + "': replicas " + llvm::Twine(i) + " and " +
                             llvm::Twine(j) + " would both live on " + devices[i].str() +
                             " (a node moved for want of a kernel?)");
      v.devices = std::move(devices);
    }
    return llvm::Error::success();
  }

  Graph &g_;
  const Cluster &c_;
  const KernelAvailability &kernels_;
  PlacerOptions opts_;
  ColocationGroups groups_;
  std::vector<GroupPlan> plans_;
  std::map<int, const ClusterDevice *> towerDevice_;
  int64_t batch_;
};

} // namespace

llvm::Error Placer::run(Graph &g) const {
  auto groups = ColocationGroups::build(g);
  if (!groups)
    return groups.takeError();
  return GraphPlacer(g, cluster_, kernels_, opts_, std::move(*groups)).run();
}

llvm::Error Placer::run(Module &m) const {
  for (Graph *g : m.graphs())
    if (auto e = run(*g))
      return e;
  for (Variable &v : m.variables())
    if (v.devices.empty())
      v.devices = {cluster_.host().id};
  return llvm::Error::success();
}

std::function<llvm::Error(Module &)> makePlacerFunction(Cluster cluster, KernelAvailability kernels,
                                                        PlacerOptions opts) {
  auto shared = std::make_shared<const Cluster>(std::move(cluster));
  return [shared, kernels = std::move(kernels), opts](Module &m) {
    return Placer(*shared, kernels, opts).run(m);
  };
}

} // namespace graphc
