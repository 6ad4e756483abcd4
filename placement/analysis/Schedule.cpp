#include "placement/analysis/Schedule.h"

#include "ir/Cost.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <queue>

namespace graphc {

llvm::SmallVector<const Node *, 8> Schedule::predecessors(const Node *n) const {
  llvm::SmallVector<const Node *, 8> preds;
  for (const Value *v : n->operands())
    preds.push_back(v->producer());
  auto it = controlDeps.find(n);
  if (it != controlDeps.end())
    preds.append(it->second.begin(), it->second.end());
  return preds;
}

/// Nodes that read the bytes of `v`: its users, and users of views of it.
static void collectReaders(const Value *v, llvm::SmallVectorImpl<const Node *> &out) {
  for (const Node *u : v->users()) {
    out.push_back(u);
    if (isViewOp(u->op()))
      collectReaders(u->result(), out);
  }
}

/// Rule 4: a device's optimizer updates of one op move to the position of its
/// last one, together, so that the executor can run them as one multi-tensor
/// launch (Kernel::runGroup). Nothing in a step depends on an update (it
/// produces nothing, and readers of its variable come before it), so a later
/// position is always valid; the gradients it reads live that much longer.
static std::vector<const Node *> groupOptimizerUpdates(llvm::ArrayRef<const Node *> issued,
                                                       const Schedule &s) {
  // An update that another node waits for (a control dependency: a later
  // writer of a variable it reads) stays where it is.
  llvm::DenseSet<const Node *> awaited;
  for (const auto &[node, deps] : s.controlDeps)
    awaited.insert(deps.begin(), deps.end());
  auto movable = [&](const Node *n) {
    return isOptimizerUpdate(n->op()) && n->numResults() == 0 && !awaited.count(n);
  };
  auto keyOf = [&](const Node *n) { return std::pair(s.deviceOf.lookup(n), (unsigned)n->op()); };
  llvm::DenseMap<std::pair<unsigned, unsigned>, const Node *> last;
  for (const Node *n : issued)
    if (movable(n))
      last[keyOf(n)] = n;
  llvm::DenseMap<std::pair<unsigned, unsigned>, std::vector<const Node *>> held;
  std::vector<const Node *> out;
  for (const Node *n : issued) {
    if (!movable(n)) {
      out.push_back(n);
      continue;
    }
    auto &group = held[keyOf(n)];
    group.push_back(n);
    if (last.lookup(keyOf(n)) == n)
      llvm::append_range(out, group);
  }
  return out;
}

/// Rule 5: whether the executor issues `n` as an operation on its device's
/// primary stream (a kernel). A wait of a node is applied to the stream of
/// its operation, and the other streams wait for the primary (CudaDevice.h),
/// so a release must wait there.
static bool launchesKernel(const Node &n) {
  return !isViewOp(n.op()) && !isCommunication(n.op()) && n.op() != Op::Input &&
         n.op() != Op::Variable && n.op() != Op::Constant;
}

/// Rule 5 on a scheduled graph.
static void releaseSentValues(const Graph &g, Schedule &s) {
  for (const Node *n : g.nodes())
    if (isCollective(n->op()))
      return;
  llvm::DenseSet<const Value *> outputs(g.outputs().begin(), g.outputs().end());
  for (const Node *n : g.nodes()) {
    const unsigned device = s.deviceOf.lookup(n);
    for (unsigned i = 0; i < n->numResults(); ++i) {
      const Value *v = n->result(i);
      llvm::SmallVector<const Node *, 4> remote;
      unsigned after = 0;
      for (const Node *u : v->users())
        if (s.deviceOf.lookup(u) != device) {
          remote.push_back(u);
          after = std::max(after, s.position.lookup(u));
        }
      if (remote.empty() || outputs.count(v) || n->op() == Op::Input)
        continue;
      const auto &order = s.order[device];
      auto it = llvm::find_if(order, [&](const Node *x) {
        return s.position.lookup(x) > after && launchesKernel(*x);
      });
      if (it == order.end())
        continue; // lives to the end of the step
      s.releasedAt[v] = *it;
      auto &deps = s.controlDeps[*it];
      for (const Node *u : remote)
        if (!llvm::is_contained(deps, u))
          deps.push_back(u);
    }
  }
}

llvm::Expected<Schedule> buildSchedule(const Graph &g,
                                       const std::function<std::string(const Node &)> &deviceOf) {
  Schedule s;
  llvm::StringMap<unsigned> deviceIndex;
  std::vector<std::string> names;
  for (const Node *n : g.nodes())
    names.push_back(deviceOf(*n));
  s.devices = names;
  llvm::sort(s.devices);
  s.devices.erase(std::unique(s.devices.begin(), s.devices.end()), s.devices.end());
  for (unsigned i = 0; i < s.devices.size(); ++i)
    deviceIndex[s.devices[i]] = i;
  s.order.resize(s.devices.size());

  // Rule 2: readers of a variable before its writers.
  llvm::StringMap<llvm::SmallVector<const Node *, 8>> readers;
  for (const Node *n : g.nodes())
    if (n->op() == Op::Variable) {
      llvm::SmallVector<const Node *, 8> r;
      collectReaders(n->result(), r);
      auto &all = readers[n->attrs().getString("var")];
      all.append(r.begin(), r.end());
    }
  for (const Node *n : g.nodes()) {
    if (!isVariableUpdate(n->op()))
      continue;
    auto it = readers.find(n->attrs().getString("var"));
    if (it == readers.end())
      continue;
    for (const Node *r : it->second)
      if (r != n && !isVariableUpdate(r->op()))
        s.controlDeps[n].push_back(r);
  }

  // Rule 3: a collective that writes a variable (AllGather) follows the
  // writers of that variable before it on its device: it sends what they
  // wrote (sharded optimizer state: the update of this device's piece).
  {
    std::map<std::pair<std::string, std::string>, llvm::SmallVector<const Node *, 2>> written;
    unsigned i = 0;
    for (const Node *n : g.nodes()) {
      const std::string &device = names[i++];
      if (!isVariableUpdate(n->op()))
        continue;
      auto &before = written[{n->attrs().getString("var"), device}];
      if (isCollective(n->op()))
        llvm::append_range(s.controlDeps[n], before);
      before.push_back(n);
    }
  }

  // Kahn's algorithm, lowest graph position first.
  std::vector<const Node *> nodes(g.nodes().begin(), g.nodes().end());
  llvm::DenseMap<const Node *, unsigned> index, pending;
  llvm::DenseMap<const Node *, llvm::SmallVector<const Node *, 4>> successors;
  for (unsigned i = 0; i < nodes.size(); ++i)
    index[nodes[i]] = i;
  for (const Node *n : nodes) {
    auto preds = s.predecessors(n);
    llvm::DenseSet<const Node *> unique(preds.begin(), preds.end());
    pending[n] = unique.size();
    for (const Node *p : unique)
      successors[p].push_back(n);
  }
  std::priority_queue<unsigned, std::vector<unsigned>, std::greater<>> ready;
  for (const Node *n : nodes)
    if (pending[n] == 0)
      ready.push(index[n]);
  std::vector<const Node *> issued;
  while (!ready.empty()) {
    const Node *n = nodes[ready.top()];
    ready.pop();
    s.deviceOf[n] = deviceIndex[deviceOf(*n)];
    issued.push_back(n);
    for (const Node *succ : successors[n])
      if (--pending[succ] == 0)
        ready.push(index[succ]);
  }
  if (issued.size() != nodes.size()) {
    for (const Node *n : nodes)
      if (pending[n] && isVariableUpdate(n->op()))
        return nodeError(*n, "writes variable '" + n->attrs().getString("var") +
                                 "' that a node it depends on reads after the write; a step "
                                 "cannot both update a variable and read the new value");
    return makeError("graph '" + g.name() + "' has a cycle");
  }
  for (const Node *n : groupOptimizerUpdates(issued, s)) {
    s.position[n] = s.position.size();
    s.order[s.deviceOf[n]].push_back(n);
  }
  if (g.module().plan().releaseSent.value_or(false))
    releaseSentValues(g, s);
  return s;
}

int cpuDeviceThreads(const Schedule &main, llvm::ArrayRef<std::string> devices,
                     llvm::function_ref<bool(llvm::StringRef)> isCpu, int cores) {
  std::vector<int64_t> flops(devices.size(), 0);
  int64_t most = 0;
  for (size_t d = 0; d < devices.size(); ++d) {
    if (!isCpu(devices[d]))
      continue;
    auto it = llvm::find(main.devices, devices[d]);
    if (it != main.devices.end())
      for (const Node *n : main.order[it - main.devices.begin()])
        flops[d] += nodeCost(*n).flops;
    most = std::max(most, flops[d]);
  }
  int computing = 0;
  for (size_t d = 0; d < devices.size(); ++d)
    computing += isCpu(devices[d]) && 10 * flops[d] >= most;
  return std::max(1, cores / std::max(1, computing));
}

} // namespace graphc
