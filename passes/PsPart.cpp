//===- PsPart.cpp - Parameter-server tasks of a multi-worker plan -----------===//
//
// Stages (PsPart.h states the guarantees): shard the updated variables by
// bytes and record the shards; read them back (checked: a plan is a file a
// user may hand us); cut a worker's part (updates out, sums out as graph
// outputs); cut a task's part (inputs in, updates kept, the rest out).
//
//===----------------------------------------------------------------------===//

#include "passes/PsPart.h"

#include "ir/Builder.h"
#include "ir/DeviceId.h"
#include "ir/Diagnostics.h"
#include "passes/AggregateGradients.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace graphc {

namespace {

/// The update of every updated variable, in graph order; errors for what a
/// parameter server cannot hold.
llvm::Expected<llvm::StringMap<Node *>> updatesOf(const Module &m) {
  llvm::StringMap<Node *> update;
  const Graph *g = m.findGraph("main");
  if (!g)
    return makeError("module '" + m.name() + "' has no training step (graph main)");
  for (Node *n : g->nodes()) {
    if (!isVariableUpdate(n->op()))
      continue;
    std::string var = n->attrs().getString("var");
    if (const Variable *v = m.findVariable(var); v && !v->persistent())
      continue; // a gradient accumulator's reset stays with its tower
    if (n->tower() >= 0 || update.count(var))
      return nodeError(*n, "updates '" + var +
                               "' once per tower (--params mirrored); parameter-server tasks "
                               "hold one copy of each variable: plan with --params cpu");
    const Variable *v = m.findVariable(var);
    if (!v)
      return nodeError(*n, "updates unknown variable '" + var + "'");
    if (v->type.dtype != DType::F32)
      return nodeError(*n, "updates '" + var + "' of type " + toString(v->type) +
                               "; parameter-server tasks carry f32 variables only");
    std::optional<DeviceId> device =
        n->assignedDevice() ? n->assignedDevice() : n->requestedDevice();
    if (device && !device->isHost())
      return nodeError(*n, "updates '" + var + "' on " + device->str() +
                               "; parameter-server tasks take the sums from the workers' hosts: "
                               "plan with --params cpu");
    update[var] = n;
  }
  return update;
}

std::vector<std::string> slotsOf(const Node &update) {
  return update.attrs().getStrings("slots");
}

/// The sum across workers that WorkerPart put after a sum over towers.
bool isSumAcrossWorkers(const Node &n) {
  return n.op() == Op::AllReduce && n.attrs().has("workers") && n.numOperands() == 1 &&
         n.attrs().getInt("nranks") == 1 &&
         llvm::StringRef(n.attrs().getString("group")).startswith("workers/");
}

} // namespace

llvm::Error checkPsAccumulation(unsigned accumulate, bool async) {
  if (!async || accumulate <= 1)
    return llvm::Error::success();
  return makeError("--accumulate " + llvm::Twine(accumulate) +
                   " with --ps-async: asynchronous ps tasks apply each worker's gradients as "
                   "they arrive, so there is no update to accumulate for; use synchronous ps "
                   "tasks (leave out --ps-async) or --accumulate 1");
}

unsigned planPsTasks(const Module &m) {
  int64_t p = m.plan().ps.value_or(0);
  return p > 0 ? (unsigned)std::min<int64_t>(p, 1 << 20) : 0;
}

bool planPsAsync(const Module &m) {
  return m.plan().psAsync.value_or(false);
}

llvm::Error shardOverPs(Module &plan, unsigned ps, bool async) {
  if (ps == 0)
    return makeError("a plan with parameter-server tasks needs at least one (--ps)");
  if (auto e = checkPsAccumulation((unsigned)plan.plan().accumulate.value_or(1), async))
    return e;
  // Each task would decide on its own shard's gradients whether to skip the
  // step: the variables would part ways.
  if (plan.plan().lossScale)
    return makeError("dynamic loss scaling (--loss-scale, --precision fp16) is not supported "
                     "with parameter-server tasks (--ps): every update must see every "
                     "gradient's check; use --params cpu or mirrored, or --loss-scale off");
  auto updates = updatesOf(plan);
  if (!updates)
    return updates.takeError();
  std::vector<const Variable *> vars;
  std::vector<int64_t> bytes;
  for (const Variable &v : plan.variables()) {
    auto it = updates->find(v.name);
    if (it == updates->end())
      continue;
    int64_t b = v.type.bytes();
    for (const std::string &s : slotsOf(*it->second))
      if (const Variable *slot = plan.findVariable(s))
        b += slot->type.bytes();
    vars.push_back(&v);
    bytes.push_back(b);
  }
  if (vars.empty())
    return makeError("module '" + plan.name() +
                     "' updates no variable: parameter-server tasks need a training step");
  std::vector<unsigned> owner = balanceByBytes(bytes, ps);
  Strings names;
  Ints owners;
  for (size_t i = 0; i < vars.size(); ++i) {
    names.push_back(vars[i]->name);
    owners.push_back(owner[i]);
  }
  PlanInfo &info = plan.plan();
  info.ps = (int64_t)ps;
  info.psVariables = names;
  info.psOwners = owners;
  info.psAsync = async ? std::optional<bool>(true) : std::nullopt;
  return llvm::Error::success();
}

llvm::Expected<PsShards> psShards(const Module &plan) {
  PsShards s;
  s.tasks = planPsTasks(plan);
  auto bad = [&](const llvm::Twine &why) {
    return makeError("module '" + plan.name() + "': its parameter-server shards " + why);
  };
  if (s.tasks == 0)
    return bad("are missing: it has no ps tasks (meta `ps`)");
  const std::optional<Strings> &names = plan.plan().psVariables;
  const std::optional<Ints> &owners = plan.plan().psOwners;
  if (!names || !owners || names->size() != owners->size() || names->empty())
    return bad("are malformed (meta `ps_variables` and `ps_owners`: names and tasks, one each)");
  auto updates = updatesOf(plan);
  if (!updates)
    return updates.takeError();
  s.taskBytes.assign(s.tasks, 0);
  llvm::StringSet<> seen;
  for (size_t i = 0; i < names->size(); ++i) {
    const std::string &name = (*names)[i];
    const Variable *v = plan.findVariable(name);
    if (!v || !seen.insert(name).second)
      return bad(v ? "name '" + name + "' twice" : "name an unknown variable '" + name + "'");
    if ((*owners)[i] < 0 || (*owners)[i] >= (int64_t)s.tasks)
      return bad("give '" + name + "' to task " + llvm::Twine((*owners)[i]) + " of " +
                 llvm::Twine(s.tasks));
    PsRoute r;
    r.var = name;
    r.task = (unsigned)(*owners)[i];
    r.type = v->type;
    s.taskBytes[r.task] += v->type.bytes();
    auto it = updates->find(name);
    if (it == updates->end())
      return bad("name '" + name + "', which the step does not update");
    for (const std::string &slot : slotsOf(*it->second)) {
      const Variable *sv = plan.findVariable(slot);
      if (!sv || sv->type != v->type)
        return bad("hold slot '" + slot + "' of '" + name + "', which " +
                   (sv ? "is not of the variable's type" : "the module lacks"));
      r.slots.push_back(slot);
      s.taskBytes[r.task] += sv->type.bytes();
    }
    s.variables.push_back(std::move(r));
  }
  // A variable updated in a graph (the training step's main) but no shard's.
  for (const Variable &v : plan.variables())
    if (updates->count(v.name) && !seen.count(v.name))
      return bad("leave out '" + v.name + "', which the step updates");
  return s;
}

llvm::Expected<std::vector<PsRoute>> selectPsWorkerPart(Module &m) {
  auto shards = psShards(m);
  if (!shards)
    return shards.takeError();
  Graph &g = m.main();
  const bool async = planPsAsync(m);
  auto updates = updatesOf(m);
  if (!updates)
    return updates.takeError();
  llvm::DenseSet<const Node *> gone;
  std::vector<PsRoute> routes;
  for (PsRoute r : shards->variables) {
    Node *update = (*updates)[r.var];
    Value *sum = update->operand(0);
    if (isSumAcrossWorkers(*sum->producer())) {
      gone.insert(sum->producer());
      sum = sum->producer()->operand(0);
    }
    if (sum->type() != r.type)
      return nodeError(*update, "reads a sum of type " + toString(sum->type()) + " for '" + r.var +
                                    "' of type " + toString(r.type));
    gone.insert(update);
    r.output = (unsigned)g.outputs().size();
    g.addOutput(sum);
    routes.push_back(std::move(r));
  }
  for (Node *n : g.nodes()) {
    if (!async || gone.count(n) || n->op() != Op::AllReduce || !n->attrs().has("workers"))
      continue;
    // No step barrier between workers: each one's loss is its own part's.
    if (!isSumAcrossWorkers(*n))
      return nodeError(*n, "sums '" + n->attrs().getString("group") +
                               "' across the workers at every step, which --ps-async does not "
                               "do (no barrier between workers): use --bn local or frozen");
    n->result()->replaceAllUsesWith(n->operand(0));
    gone.insert(n);
  }
  // Outputs that read a removed sum read its operand.
  std::vector<Value *> outputs(g.outputs().begin(), g.outputs().end());
  for (Value *&out : outputs)
    if (gone.count(out->producer()) && isSumAcrossWorkers(*out->producer()))
      out = out->producer()->operand(0);
  g.setOutputs(outputs);
  g.eraseIf([&](const Node &n) { return gone.count(&n) > 0; });
  m.removeUnusedVariables();
  return routes;
}

llvm::Expected<std::vector<PsRoute>> selectPsTaskPart(Module &m, unsigned task) {
  auto shards = psShards(m);
  if (!shards)
    return shards.takeError();
  if (task >= shards->tasks)
    return makeError("ps task " + llvm::Twine(task) + " is not in a plan of " +
                     llvm::Twine(shards->tasks) + " ps tasks");
  Graph &g = m.main();
  auto updates = updatesOf(m);
  if (!updates)
    return updates.takeError();
  Node *lr = g.findInput("lr");
  if (!lr)
    return makeError("module '" + m.name() + "' has no Input 'lr' for its updates");
  llvm::DenseSet<const Node *> keep{lr};
  std::vector<PsRoute> routes;
  Builder b(g);
  for (PsRoute r : shards->variables) {
    if (r.task != task)
      continue;
    Node *update = (*updates)[r.var];
    for (unsigned i = 1; i < update->numOperands(); ++i)
      if (update->operand(i)->producer() != lr)
        return nodeError(*update, "reads more than its sum and the learning rate");
    r.input = g.uniqueName("ps/" + r.var);
    Node *in = b.input(r.input, update->operand(0)->type())->producer();
    g.moveAfter(in, lr); // before every update
    update->setOperand(0, in->result());
    keep.insert(in);
    keep.insert(update);
    routes.push_back(std::move(r));
  }
  g.setOutputs({});
  g.eraseIf([&](const Node &n) { return !keep.count(&n); });
  for (Graph *other : m.graphs()) // the kept forward graph reads other tasks' variables
    if (other != &g)
      m.removeGraph(other->name());
  for (Node *n : g.nodes()) {
    n->setTower(-1);
    n->setRequestedDevice(DeviceId::host());
    n->setAssignedDevice(DeviceId::host());
  }
  m.removeUnusedVariables();
  for (Variable &v : m.variables())
    v.devices = {DeviceId::host()};
  m.plan().psTask = (int64_t)task;
  return routes;
}

} // namespace graphc
