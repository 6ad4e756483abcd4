//===- WorkerPart.cpp - One worker's part of a multi-worker plan ------------===//
//
// Stages (WorkerPart.h states the guarantees):
//   1. read the plan's workers, towers and tower batches; find the worker's
//      towers and its slice of the global batch;
//   2. mark what goes: nodes of other workers' towers, and nodes that read
//      only what goes (sums and concatenations over towers lose operands
//      instead);
//   3. cut: tower sums keep their operands, other nodes are erased (users
//      first); SplitBatch gives the other workers' towers nothing;
//   4. join across workers: an AllReduce after every tower sum, `workers` on
//      every AllReduce group with ranks renumbered;
//   5. renumber GPUs, fix the data inputs' batch, re-infer shapes, set meta.
//
//===----------------------------------------------------------------------===//

#include "passes/WorkerPart.h"

#include "ir/DeviceId.h"
#include "ir/Diagnostics.h"
#include "ir/ShapeInference.h"
#include "passes/AccumulateGradients.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <functional>
#include <map>
#include <numeric>

namespace graphc {

unsigned planWorkers(const Module &m) {
  return (unsigned)std::max<int64_t>(1, m.plan().workers.value_or(1));
}

namespace {

struct Plan {
  unsigned workers = 1, towers = 0;
  /// Worker w owns towers [firstTower[w], firstTower[w + 1]).
  std::vector<unsigned> firstTower;
  Ints towerBatches;
};

std::string listed(const Ints &v) {
  return llvm::join(llvm::map_range(v, [](int64_t b) { return std::to_string(b); }), ", ");
}

llvm::Expected<Plan> readPlan(const Module &m) {
  Plan p;
  p.workers = planWorkers(m);
  p.towers = (unsigned)m.plan().towers.value_or(0);
  p.towerBatches = m.plan().towerBatches.value_or(Ints{});
  if (m.plan().worker)
    return makeError("module '" + m.name() + "' is already worker " +
                     llvm::Twine(*m.plan().worker) + "'s part of its plan");
  Ints perWorker = m.plan().workerTowers.value_or(Ints{});
  if (perWorker.empty() && p.towers % p.workers == 0)
    perWorker.assign(p.workers, p.towers / p.workers);
  const bool consistent =
      p.towers > 0 && perWorker.size() == p.workers && p.towerBatches.size() == p.towers &&
      llvm::all_of(perWorker, [](int64_t t) { return t >= 1; }) &&
      std::accumulate(perWorker.begin(), perWorker.end(), int64_t(0)) == (int64_t)p.towers;
  if (!consistent)
    return makeError("module '" + m.name() + "' is planned for " + llvm::Twine(p.workers) +
                     " workers (towers " + listed(perWorker) + ") but has " +
                     llvm::Twine(p.towers) + " towers (" + llvm::Twine(p.towerBatches.size()) +
                     " tower batches); every worker of a plan owns consecutive towers, at least "
                     "one");
  p.firstTower.push_back(0);
  for (int64_t t : perWorker)
    p.firstTower.push_back(p.firstTower.back() + (unsigned)t);
  return p;
}

/// gpu:K → K; -1 for anything else (the host, none).
int gpuIndex(std::optional<DeviceId> device) {
  return device && device->isGpu() ? (int)device->index : -1;
}

using Renumber = std::function<std::optional<DeviceId>(std::optional<DeviceId>)>;

/// The tower a value comes from, looking through transfers (-1: none).
int towerOf(const Value *v) {
  const Node *p = v->producer();
  while (p->tower() < 0 && p->op() == Op::Transfer)
    p = p->operand(0)->producer();
  return p->tower();
}

} // namespace

llvm::Expected<WorkerSlice> workerSlice(const Module &m, unsigned worker) {
  if (const PlanInfo &p = m.plan(); p.worker) {
    if ((unsigned)*p.worker != worker)
      return makeError("module '" + m.name() + "' is worker " + llvm::Twine(*p.worker) +
                       "'s part, not worker " + llvm::Twine(worker) + "'s");
    return WorkerSlice{p.workerOffset.value_or(0), p.batch.value_or(0)};
  }
  auto p = readPlan(m);
  if (!p)
    return p.takeError();
  if (worker >= p->workers)
    return makeError("worker " + llvm::Twine(worker) + " is not in a plan of " +
                     llvm::Twine(p->workers) + " workers");
  WorkerSlice s;
  for (unsigned t = 0; t < p->firstTower[worker + 1]; ++t)
    (t < p->firstTower[worker] ? s.offset : s.count) += p->towerBatches[t];
  return s;
}

namespace {

/// Stages 2 to 4 and the devices of stage 5 on one graph of the plan: main,
/// and the micro-step graph of gradient accumulation when there is one.
llvm::Error cutGraph(Graph &g, const std::function<bool(int)> &local, unsigned W,
                     const WorkerSlice &slice, const Renumber &renumber) {
  // 2. What goes.
  llvm::DenseSet<const Node *> gone;
  std::vector<Node *> sums;
  for (Node *n : g.nodes()) {
    int gpu = gpuIndex(n->assignedDevice() ? n->assignedDevice() : n->requestedDevice());
    if (n->tower() < 0 && gpu >= 0 && n->op() != Op::Transfer)
      return makeError("node '" + n->name() +
                       "' belongs to no tower but runs on gpu:" + llvm::Twine(gpu) +
                       ": variables on one GPU (--params gpu:K or spread) are not planned "
                       "across workers yet; use --params mirrored or cpu");
    if (n->tower() >= 0) {
      if (!local(n->tower()))
        gone.insert(n);
      continue;
    }
    bool joinsTowers = n->op() == Op::AddN || n->op() == Op::ConcatBatch;
    unsigned kept = 0, lost = 0;
    for (Value *v : n->operands())
      ++(gone.count(v->producer()) ? lost : kept);
    if (joinsTowers) {
      if (n->op() == Op::AddN &&
          llvm::any_of(n->operands(), [](Value *v) { return towerOf(v) >= 0; }))
        sums.push_back(n);
      if (kept == 0 && lost > 0)
        return makeError("node '" + n->name() + "' joins only other workers' towers");
    } else if (lost > 0 || (n->op() == Op::Transfer && gpuIndex(n->assignedDevice()) >= 0 &&
                            !local(gpuIndex(n->assignedDevice())))) {
      gone.insert(n);
    }
  }

  // 3. Cut.
  for (Node *n : g.nodes())
    if (!gone.count(n) && (n->op() == Op::AddN || n->op() == Op::ConcatBatch)) {
      llvm::SmallVector<Value *, 8> kept;
      for (Value *v : n->operands())
        if (!gone.count(v->producer()))
          kept.push_back(v);
      n->setOperands(kept);
    }
  for (Value *out : g.outputs())
    if (gone.count(out->producer()))
      return makeError("output '" + out->name() + "' comes from another worker's tower");
  g.eraseIf([&](const Node &n) { return gone.count(&n) > 0; });
  for (Node *n : g.nodes())
    if (n->op() == Op::SplitBatch) {
      Ints sizes = n->attrs().getInts("sizes");
      for (int t = 0; t < (int)sizes.size(); ++t)
        if (!local(t))
          sizes[t] = 0;
      n->attrs().set("sizes", sizes);
      Value *in = n->operand(0);
      TensorType type = in->type();
      type.shape[0] = slice.count;
      in->setType(type);
    }

  // 4. Join across workers.
  for (Node *sum : sums) {
    Attrs a;
    a.set("group", "workers/" + sum->name());
    a.set("rank", (int64_t)0);
    a.set("nranks", (int64_t)1);
    a.set("reduction", std::string("sum"));
    a.set("workers", (int64_t)W);
    std::string name = g.uniqueName(sum->name() + "/across_workers");
    Node *ar = g.createNode(Op::AllReduce, {sum->result()}, {sum->result()->type()}, a, name);
    ar->copyPlacementFrom(*sum, /*assigned=*/true);
    ar->setPlacementReason("sums the workers' parts");
    sum->result()->replaceAllUsesWith(ar->result());
    ar->setOperand(0, sum->result());
    g.moveAfter(ar, sum);
  }
  std::map<std::string, std::vector<Node *>> groups;
  for (Node *n : g.nodes())
    if (n->op() == Op::AllReduce && !n->attrs().has("workers"))
      groups[n->attrs().getString("group")].push_back(n);
  for (auto &[name, members] : groups) {
    llvm::stable_sort(members, [](const Node *a, const Node *b) {
      return a->attrs().getInt("rank") < b->attrs().getInt("rank");
    });
    for (size_t r = 0; r < members.size(); ++r) {
      members[r]->attrs().set("rank", (int64_t)r);
      members[r]->attrs().set("nranks", (int64_t)members.size());
      members[r]->attrs().set("workers", (int64_t)W);
    }
  }

  // 5. The GPUs of its nodes.
  for (Node *n : g.nodes()) {
    n->setRequestedDevice(renumber(n->requestedDevice()));
    n->setAssignedDevice(renumber(n->assignedDevice()));
  }
  // A Transfer's "from" and "to" spell its ends for the reader
  // (InsertTransfers.h): its producer's assigned device and its own.
  for (Node *n : g.nodes())
    if (n->op() == Op::Transfer) {
      n->attrs().set("from", n->operand(0)->producer()->assignedDevice()->str());
      n->attrs().set("to", n->assignedDevice()->str());
    }
  return llvm::Error::success();
}

} // namespace

llvm::Error selectWorkerPart(Module &m, unsigned worker) {
  if (planWorkers(m) == 1)
    return llvm::Error::success();
  // 1. The plan.
  auto plan = readPlan(m);
  if (!plan)
    return plan.takeError();
  auto slice = workerSlice(m, worker);
  if (!slice)
    return slice.takeError();
  const unsigned W = plan->workers;
  const int lo = (int)plan->firstTower[worker], hi = (int)plan->firstTower[worker + 1];
  if (slice->count == 0)
    return makeError("the global batch of " + llvm::Twine(m.batch().value_or(0)) +
                     " gives worker " + llvm::Twine(worker) + " of " + llvm::Twine(W) +
                     " no sample (tower batches " + listed(plan->towerBatches) +
                     "); every worker needs at least one: raise --batch");
  auto local = [&](int tower) { return tower >= lo && tower < hi; };
  Renumber renumber = [&](std::optional<DeviceId> device) -> std::optional<DeviceId> {
    int gpu = gpuIndex(device);
    return gpu < 0 ? device : DeviceId::gpu((unsigned)(gpu - lo));
  };

  // 2. to 4., and 5. for the nodes: the training step's graphs.
  for (llvm::StringRef name : {llvm::StringRef("main"), llvm::StringRef(kMicroGraph)})
    if (Graph *g = m.findGraph(name))
      if (auto e = cutGraph(*g, local, W, *slice, renumber))
        return e;

  // 5. GPUs of the variables, data, shapes, meta.
  for (Variable &v : m.variables()) {
    std::vector<DeviceId> devices;
    for (DeviceId d : v.devices) {
      int gpu = gpuIndex(d);
      if (gpu < 0 || (gpu >= lo && gpu < hi))
        devices.push_back(*renumber(d));
    }
    v.devices = std::move(devices);
  }
  // The accumulators of the other workers' towers: no node is left to use them.
  llvm::StringSet<> used;
  for (const Graph *g : m.graphs())
    for (const Node *n : g->nodes())
      if (n->op() == Op::Variable || isVariableUpdate(n->op()))
        used.insert(n->attrs().getString("var"));
  std::vector<std::string> foreign;
  for (const Variable &v : m.variables())
    if (!v.persistent() && !used.count(v.name))
      foreign.push_back(v.name);
  for (const std::string &name : foreign)
    m.removeVariable(name);
  // Concatenations over towers now hold the worker's rows.
  if (auto e = inferShapes(m))
    return e;
  Ints mine(plan->towerBatches.begin() + lo, plan->towerBatches.begin() + hi);
  PlanInfo &p = m.plan();
  p.globalBatch = p.batch.value_or(0);
  p.batch = slice->count;
  p.worker = (int64_t)worker;
  p.workerOffset = slice->offset;
  p.towers = (int64_t)(hi - lo);
  p.towerBatches = mine;
  return llvm::Error::success();
}

} // namespace graphc
