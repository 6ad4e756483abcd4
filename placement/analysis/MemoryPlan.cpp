#include "placement/analysis/MemoryPlan.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <climits>
#include <numeric>

namespace graphc {

OffsetPlan planOffsets(llvm::ArrayRef<BufferRequest> requests, int64_t alignment) {
  OffsetPlan p;
  p.offsets.assign(requests.size(), 0);
  auto aligned = [&](int64_t b) { return (b + alignment - 1) / alignment * alignment; };
  std::vector<unsigned> byBytes(requests.size());
  std::iota(byBytes.begin(), byBytes.end(), 0);
  std::stable_sort(byBytes.begin(), byBytes.end(), [&](unsigned a, unsigned b) {
    if (requests[a].bytes != requests[b].bytes)
      return requests[a].bytes > requests[b].bytes;
    return requests[a].first < requests[b].first;
  });
  // The buffers placed so far, by occupied range (offset, end): those that
  // overlap a new buffer in time come out of a scan already in the order the
  // gap search takes them, with no sort per buffer (a device of a 25,000-node
  // plan has thousands of buffers).
  struct Placed {
    int64_t lo, hi;
    unsigned first, last;
    bool operator<(const Placed &o) const { return lo != o.lo ? lo < o.lo : hi < o.hi; }
  };
  std::vector<Placed> placed;
  placed.reserve(requests.size());
  for (unsigned i : byBytes) {
    const BufferRequest &r = requests[i];
    p.naiveBytes += aligned(r.bytes);
    // Best fit among the gaps between occupied ranges of buffers that
    // overlap in time, by offset.
    int64_t need = aligned(r.bytes), at = 0, best = -1, bestGap = INT64_MAX;
    for (const Placed &b : placed) {
      if (b.first > r.last || r.first > b.last)
        continue;
      if (b.lo - at >= need && b.lo - at < bestGap) {
        best = at;
        bestGap = b.lo - at;
      }
      at = std::max(at, b.hi);
    }
    p.offsets[i] = best >= 0 ? best : at;
    p.arenaBytes = std::max(p.arenaBytes, p.offsets[i] + need);
    Placed self{p.offsets[i], p.offsets[i] + need, r.first, r.last};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), self), self);
  }
  // Lower bound: a sweep over positions.
  std::vector<std::pair<unsigned, int64_t>> events;
  for (const BufferRequest &r : requests) {
    events.push_back({r.first, aligned(r.bytes)});
    events.push_back({r.last + 1, -aligned(r.bytes)});
  }
  llvm::sort(events, [](auto &a, auto &b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  int64_t live = 0;
  for (auto [pos, delta] : events)
    if ((live += delta) > p.peakLiveBytes) {
      p.peakLiveBytes = live;
      p.peakPosition = pos;
    }
  return p;
}

namespace {
/// Union-find over values sharing one buffer.
struct Groups {
  llvm::DenseMap<const Value *, const Value *> parent;
  const Value *find(const Value *v) {
    auto it = parent.find(v);
    if (it == parent.end() || it->second == v)
      return v;
    const Value *root = find(it->second);
    parent[v] = root;
    return root;
  }
  void join(const Value *member, const Value *root) { parent[find(member)] = find(root); }
};
} // namespace

DeviceMemoryPlan
planDeviceMemory(const Schedule &s, unsigned device,
                 const std::function<std::optional<unsigned>(const Node &)> &inPlaceOperand) {
  DeviceMemoryPlan out;
  const auto &order = s.order[device];
  const unsigned end = order.empty() ? 0 : s.position.lookup(order.back());
  llvm::DenseSet<const Value *> graphOutputs;
  if (!order.empty())
    for (const Value *v : order.front()->graph().outputs())
      graphOutputs.insert(v);

  auto lastUse = [&](const Value *v) -> unsigned {
    unsigned last = s.position.lookup(v->producer());
    if (graphOutputs.count(v))
      return UINT_MAX;
    // Read elsewhere: until the node it is released at, or the whole step.
    auto released = s.releasedAt.find(v);
    for (const Node *u : v->users()) {
      if (s.deviceOf.lookup(u) != device) {
        if (released == s.releasedAt.end())
          return UINT_MAX;
        continue;
      }
      last = std::max(last, s.position.lookup(u));
    }
    if (released != s.releasedAt.end())
      last = std::max(last, s.position.lookup(released->second) - 1);
    return last;
  };

  Groups groups;
  llvm::DenseSet<const Value *> externalRoots;
  llvm::DenseMap<const Value *, unsigned> groupLast;
  std::vector<const Value *> values;
  for (const Node *n : order) {
    unsigned pos = s.position.lookup(n);
    for (unsigned i = 0; i < n->numResults(); ++i) {
      const Value *r = n->result(i);
      values.push_back(r);
      if (n->op() == Op::Variable || n->op() == Op::Constant) {
        externalRoots.insert(r);
      } else if (i == 0 && isViewOp(n->op()) &&
                 s.deviceOf.lookup(n->operand(0)->producer()) == device) {
        groups.join(r, n->operand(0));
      } else if (i == 0 && inPlaceOperand) {
        if (auto k = inPlaceOperand(*n)) {
          const Value *src = n->operand(*k);
          const Value *root = groups.find(src);
          if (s.deviceOf.lookup(src->producer()) == device && !externalRoots.count(root) &&
              src->producer()->op() != Op::Input && groupLast.lookup(root) == pos &&
              src->type().bytes() == r->type().bytes())
            groups.join(r, root);
        }
      }
      const Value *root = groups.find(r);
      groupLast[root] = std::max(groupLast.lookup(root), lastUse(r));
      if (n->op() == Op::Input)
        groupLast[root] = UINT_MAX;
    }
    (void)pos;
  }

  // Buffers: one per arena group.
  llvm::DenseMap<const Value *, unsigned> requestOf;
  std::vector<BufferRequest> requests;
  for (const Value *v : values) {
    const Value *root = groups.find(v);
    if (externalRoots.count(root)) {
      out.external[v] = root;
      continue;
    }
    // Feeds are copied in before the first node runs.
    unsigned first = v->producer()->op() == Op::Input ? 0 : s.position.lookup(v->producer());
    auto [it, fresh] = requestOf.try_emplace(root, requests.size());
    if (fresh) {
      requests.push_back({0, first, 0});
      out.copied.push_back(root->producer()->op() == Op::Transfer);
    }
    BufferRequest &r = requests[it->second];
    r.bytes = std::max<int64_t>(r.bytes, v->type().bytes());
    r.first = std::min(r.first, first);
    unsigned last = groupLast.lookup(root);
    r.last = std::max(r.last, last == UINT_MAX ? end : last);
  }
  out.plan = planOffsets(requests);
  for (const Value *v : values) {
    auto it = requestOf.find(groups.find(v));
    if (it != requestOf.end())
      out.offset[v] = out.plan.offsets[it->second];
  }
  out.buffers = std::move(requests);
  return out;
}

ArenaParts arenaParts(const DeviceMemoryPlan &p, int64_t alignment) {
  ArenaParts parts;
  if (p.plan.peakLiveBytes == 0) {
    parts.gaps = p.plan.arenaBytes;
    return parts;
  }
  const unsigned at = p.plan.peakPosition;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const BufferRequest &b = p.buffers[i];
    if (b.first > at || at > b.last)
      continue;
    int64_t bytes = (b.bytes + alignment - 1) / alignment * alignment;
    (p.copied[i] ? parts.copies : parts.activations) += bytes;
  }
  parts.gaps = p.plan.arenaBytes - parts.activations - parts.copies;
  return parts;
}

} // namespace graphc
