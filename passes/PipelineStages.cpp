//===- PipelineStages.cpp - Stages, per-stage sums, the schedule's order ----===//
//
// Stages:
//  1. Assign tower 0's nodes to stages (the cut, then backward nodes, then
//     sources) and stamp every tower's copy with its stage's device.
//  2. Place each variable and its reductions on its stage; with several
//     pipelines, per-pipeline sums, per-stage all-reduces, per-pipeline
//     updates.
//  3. Reorder the graph by the schedule's block starts.
//
//===----------------------------------------------------------------------===//

#include "passes/PipelineStages.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "passes/Recompute.h"
#include "passes/TowerReplication.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <limits>

namespace graphc {

DeviceId stageDevice(unsigned pipeline, unsigned stage, unsigned stages) {
  return DeviceId::gpu(pipeline * stages + stage);
}

std::vector<size_t> balancedCuts(llvm::ArrayRef<double> costs, unsigned parts,
                                 llvm::ArrayRef<double> weights) {
  const size_t n = costs.size();
  assert(parts >= 1 && parts <= n);
  std::vector<double> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  // best[j][i]: the smallest largest run of the first i costs in j runs;
  // from[j][i]: where the last of those runs starts.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> from(parts + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (unsigned j = 1; j <= parts; ++j)
    for (size_t i = j; i <= n - (parts - j); ++i)
      for (size_t k = j - 1; k < i; ++k) {
        const double weight = weights.empty() ? 1.0 : weights[j - 1];
        double worst = std::max(best[j - 1][k], weight * (prefix[i] - prefix[k]));
        if (worst < best[j][i]) { // strict: ties keep the earliest cut
          best[j][i] = worst;
          from[j][i] = k;
        }
      }
  std::vector<size_t> starts(parts + 1);
  starts[parts] = n;
  for (unsigned j = parts; j >= 1; --j)
    starts[j - 1] = from[j][starts[j]];
  return starts;
}

BlockStarts scheduleStarts(PipelineSchedule schedule, unsigned stages, unsigned microBatches) {
  const unsigned S = stages, M = microBatches;
  // Each stage's blocks in order: (backward?, micro-batch).
  std::vector<std::vector<std::pair<bool, unsigned>>> order(S);
  for (unsigned s = 0; s < S; ++s) {
    if (schedule == PipelineSchedule::GPipe) {
      for (unsigned k = 0; k < M; ++k)
        order[s].push_back({false, k});
      for (unsigned k = 0; k < M; ++k)
        order[s].push_back({true, k});
      continue;
    }
    const unsigned warm = std::min(S - s - 1, M);
    for (unsigned k = 0; k < warm; ++k)
      order[s].push_back({false, k});
    for (unsigned i = 0; i + warm < M; ++i) {
      order[s].push_back({false, warm + i});
      order[s].push_back({true, i});
    }
    for (unsigned k = M - warm; k < M; ++k)
      order[s].push_back({true, k});
  }
  const double unset = -1;
  BlockStarts b;
  b.forward.assign(S, std::vector<double>(M, unset));
  b.backward.assign(S, std::vector<double>(M, unset));
  std::vector<double> free(S, 0);
  std::vector<size_t> next(S, 0);
  // Play the stages until every block has started; each round starts at
  // least one block (both schedules are free of deadlock).
  for (bool progress = true; progress;) {
    progress = false;
    for (unsigned s = 0; s < S; ++s)
      while (next[s] < order[s].size()) {
        auto [back, k] = order[s][next[s]];
        double ready;
        if (!back)
          ready = s == 0 ? 0 : b.forward[s - 1][k] < 0 ? unset : b.forward[s - 1][k] + 1;
        else if (s + 1 == S)
          ready = b.forward[s][k] < 0 ? unset : b.forward[s][k] + 1;
        else
          ready = b.backward[s + 1][k] < 0 ? unset : b.backward[s + 1][k] + 2;
        if (ready < 0)
          break;
        double start = std::max(ready, free[s]);
        (back ? b.backward : b.forward)[s][k] = start;
        free[s] = start + (back ? 2 : 1);
        b.end = std::max(b.end, free[s]);
        ++next[s];
        progress = true;
      }
  }
  return b;
}

namespace {

/// The stage of each of tower 0's nodes, by its name without the tower
/// prefix, and of each variable; what the plan records of each stage.
struct Stages {
  llvm::StringMap<unsigned> of;
  llvm::StringMap<unsigned> ofVariable;
  std::vector<std::string> firstNode; ///< per stage
  std::vector<unsigned> nodes;        ///< forward nodes per stage
  std::vector<double> seconds;        ///< per stage, forward and backward
};

bool isSource(const Node &n) {
  return n.op() == Op::Variable || n.op() == Op::Constant || n.op() == Op::Input;
}

/// The forward node a backward node is named after (`grad/<name>/...`), or
/// none: the longest such prefix.
std::optional<size_t> namedAfter(llvm::StringRef name, const llvm::StringMap<size_t> &forward) {
  if (!name.consume_front("grad/"))
    return std::nullopt;
  for (size_t slash = name.rfind('/'); slash != llvm::StringRef::npos && slash > 0;
       slash = name.take_front(slash).rfind('/'))
    if (auto it = forward.find(name.take_front(slash)); it != forward.end())
      return it->second;
  return std::nullopt;
}

llvm::Expected<Stages> assignStages(const Graph &g, const llvm::DenseSet<const Node *> &backward,
                                    const PipelineOptions &o) {
  const unsigned S = o.stages;
  auto secondsOf = [&](const Node &n) { return o.seconds ? o.seconds(n) : 1.0; };
  std::vector<const Node *> chain;
  llvm::StringMap<size_t> index;
  for (const Node *n : g.nodes())
    if (n->tower() == 0 && !backward.contains(n) && !isSource(*n)) {
      index[stripTowerPrefix(n->name())] = chain.size();
      chain.push_back(n);
    }
  if (chain.size() < S)
    return makeError("pipeline-stages: " + llvm::Twine(S) + " stages need " + llvm::Twine(S) +
                     " forward nodes at least; the model has " + llvm::Twine(chain.size()));
  std::vector<double> costs;
  for (const Node *n : chain)
    costs.push_back(secondsOf(*n));
  for (const Node *n : g.nodes())
    if (n->tower() == 0 && backward.contains(n))
      if (auto f = namedAfter(stripTowerPrefix(n->name()), index))
        costs[*f] += secondsOf(*n);
  // A variable's gradient is added into its sum once per micro-batch and
  // updated once per step (about as long as two more additions), on the
  // stage of its first reader.
  const unsigned M = o.microBatches;
  llvm::DenseSet<const Node *> counted;
  for (size_t i = 0; i < chain.size() && o.sumSeconds; ++i)
    for (const Value *v : chain[i]->operands())
      if (v->producer()->op() == Op::Variable && counted.insert(v->producer()).second)
        costs[i] += o.sumSeconds(v->type().bytes()) * (double)(M + 1) / (double)M;
  std::vector<size_t> cuts = balancedCuts(
      costs, S, o.stageWeights.size() == S ? llvm::ArrayRef<double>(o.stageWeights) : llvm::ArrayRef<double>());

  Stages st;
  st.nodes.assign(S, 0);
  st.seconds.assign(S, 0);
  for (unsigned s = 0; s < S; ++s) {
    st.firstNode.push_back(stripTowerPrefix(chain[cuts[s]]->name()).str());
    for (size_t i = cuts[s]; i < cuts[s + 1]; ++i) {
      st.of[stripTowerPrefix(chain[i]->name())] = s;
      st.seconds[s] += costs[i];
      ++st.nodes[s];
    }
  }
  // Backward nodes: the stage of the forward node they are named after, or
  // the latest of their operands' (graph order is topological).
  for (const Node *n : g.nodes()) {
    if (n->tower() != 0 || !backward.contains(n))
      continue;
    llvm::StringRef name = stripTowerPrefix(n->name());
    std::optional<unsigned> stage;
    if (auto f = namedAfter(name, index))
      stage = st.of.lookup(stripTowerPrefix(chain[*f]->name()));
    else
      for (const Value *v : n->operands())
        if (auto it = st.of.find(stripTowerPrefix(v->producer()->name())); it != st.of.end())
          stage = std::max(stage.value_or(0), it->second);
    st.of[name] = stage.value_or(S - 1);
    if (!namedAfter(name, index))
      st.seconds[st.of[name]] += secondsOf(*n);
  }
  // Sources take their earliest reader's stage; a variable's reads all take
  // the earliest over every read (where it lives).
  auto earliestReader = [&](const Node &n) {
    unsigned stage = S - 1;
    for (const auto &v : n.results())
      for (const Node *u : v->users())
        if (auto it = st.of.find(stripTowerPrefix(u->name())); it != st.of.end())
          stage = std::min(stage, it->second);
    return stage;
  };
  for (const Node *n : g.nodes())
    if (n->tower() == 0 && n->op() == Op::Variable) {
      auto it = st.ofVariable.try_emplace(n->attrs().getString("var"), S - 1).first;
      it->second = std::min(it->second, earliestReader(*n));
    }
  for (const Node *n : g.nodes())
    if (n->tower() == 0 && isSource(*n))
      st.of[stripTowerPrefix(n->name())] = n->op() == Op::Variable
                                               ? st.ofVariable.lookup(n->attrs().getString("var"))
                                               : earliestReader(*n);
  return st;
}

struct Reduction {
  Node *update = nullptr, *sum = nullptr;
  unsigned stage = 0;
  bool state = false; ///< a moving average (Assign)
};

llvm::Expected<std::vector<Reduction>> findReductions(Graph &g, const Stages &st, unsigned towers) {
  std::vector<Reduction> out;
  for (Node *u : g.nodes()) {
    if (!isVariableUpdate(u->op()))
      continue;
    Node *s = u->operand(0)->producer();
    bool towerSum = s->op() == Op::AddN && s->tower() < 0 && s->numOperands() == towers &&
                    s->result()->users().size() == 1;
    for (unsigned t = 0; towerSum && t < towers; ++t)
      towerSum = s->operand(t)->producer()->tower() == (int)t;
    const std::string var = u->attrs().getString("var");
    auto stage = st.ofVariable.find(var);
    if (!towerSum || stage == st.ofVariable.end())
      return nodeError(*u, "pipeline-stages: the update does not read a sum over the " +
                               llvm::Twine(towers) +
                               " towers of a variable they read; run replicate-towers first");
    out.push_back({u, s, stage->second, u->op() == Op::Assign});
  }
  return out;
}

/// The variable `var` and its optimizer slots (`slots` of its update) live
/// on `devices`.
void setStorage(Module &m, const Node &update, const std::vector<DeviceId> &devices) {
  m.findVariable(update.attrs().getString("var"))->devices = devices;
  for (const std::string &slot : update.attrs().getStrings("slots"))
    if (Variable *v = m.findVariable(slot))
      v->devices = devices;
}

/// Nodes that are not a tower's but run right after one of its nodes (the
/// links of a chained sum after the part they add): rule 4 orders them
/// there.
using Anchors = llvm::DenseMap<const Node *, const Node *>;

/// parts[0] + parts[1] + ... as a chain of two-operand AddNs on `device`
/// (AddN adds left to right: the same bits as one AddN of all), so each
/// micro-batch's part dies once it is added instead of living until the
/// last micro-batch's; `last` (when given) becomes the final link.
Value *chainSum(Graph &g, llvm::ArrayRef<Value *> parts, DeviceId device, const std::string &name,
                Node *last, Anchors &anchors) {
  Value *sum = parts[0];
  for (size_t k = 1; k < parts.size(); ++k) {
    Node *link = last;
    if (k + 1 < parts.size() || !last) {
      Builder b(g);
      b.setRequestedDevice(device);
      link = b.createNode(Op::AddN, {sum, parts[k]}, {}, name + "/add_" + std::to_string(k));
    } else {
      link->setOperands({sum, parts[k]});
      link->setRequestedDevice(device);
    }
    anchors[link] = parts[k]->producer();
    sum = link->result();
  }
  return sum;
}

/// Several pipelines: per-pipeline sums, an all-reduce per stage and
/// pipeline, an update per replica (file comment, rule 3).
llvm::Error allReduceStages(Module &m, Graph &g, std::vector<Reduction> &reductions,
                            const PipelineOptions &o, Anchors &anchors) {
  const unsigned S = o.stages, M = o.microBatches, P = o.pipelines;
  // partial[i][p]: pipeline p's sum of reduction i.
  std::vector<std::vector<Value *>> partial(reductions.size(), std::vector<Value *>(P));
  for (size_t i = 0; i < reductions.size(); ++i)
    for (unsigned p = 0; p < P; ++p) {
      const Reduction &r = reductions[i];
      llvm::SmallVector<Value *, 8> parts;
      for (unsigned k = 0; k < M; ++k)
        parts.push_back(r.sum->operand(p * M + k));
      partial[i][p] = chainSum(g, parts, stageDevice(p, r.stage, S),
                               "pipeline_" + std::to_string(p) + "/" + r.sum->name(), nullptr,
                               anchors);
    }
  std::vector<std::vector<Value *>> reduced(reductions.size(), std::vector<Value *>(P));
  for (unsigned s = 0; s < S; ++s)
    for (bool state : {false, true}) {
      std::vector<size_t> members;
      for (size_t i = 0; i < reductions.size(); ++i)
        if (reductions[i].stage == s && reductions[i].state == state)
          members.push_back(i);
      if (members.empty())
        continue;
      const std::string group = "stage_" + std::to_string(s) + (state ? "/state" : "/grads");
      for (unsigned p = 0; p < P; ++p) {
        llvm::SmallVector<Value *, 8> parts;
        for (size_t i : members)
          parts.push_back(partial[i][p]);
        Attrs a;
        a.set("group", group);
        a.set("rank", (int64_t)p);
        a.set("nranks", (int64_t)P);
        a.set("reduction", std::string("sum"));
        Builder b(g);
        b.setRequestedDevice(stageDevice(p, s, S));
        Node *ar = b.createNode(Op::AllReduce, parts, std::move(a),
                                "pipeline_" + std::to_string(p) + "/allreduce/" + group);
        for (size_t j = 0; j < members.size(); ++j)
          reduced[members[j]][p] = ar->result((unsigned)j);
      }
    }
  for (size_t i = 0; i < reductions.size(); ++i) {
    const Reduction &r = reductions[i];
    std::vector<DeviceId> replicas;
    for (unsigned p = 0; p < P; ++p) {
      replicas.push_back(stageDevice(p, r.stage, S));
      llvm::SmallVector<Value *, 3> operands{reduced[i][p]};
      for (unsigned k = 1; k < r.update->numOperands(); ++k)
        operands.push_back(r.update->operand(k));
      Builder b(g);
      b.setRequestedDevice(replicas.back());
      auto copy = b.tryCreate(r.update->op(), operands, r.update->attrs(),
                              "pipeline_" + std::to_string(p) + "/" + r.update->name());
      if (!copy)
        return copy.takeError();
    }
    setStorage(m, *r.update, replicas);
  }
  llvm::DenseSet<const Node *> replaced;
  for (const Reduction &r : reductions) {
    replaced.insert(r.update);
    replaced.insert(r.sum);
  }
  g.eraseIf([&](const Node &n) { return replaced.contains(&n); });
  return llvm::Error::success();
}

/// Rule 4: the host's feeding nodes, the towers by their blocks' starts,
/// then the rest, each in graph order.
void orderBySchedule(Graph &g, const llvm::DenseSet<const Node *> &backward, const Stages &st,
                     const PipelineOptions &o, const Anchors &anchors) {
  const BlockStarts starts = scheduleStarts(o.schedule, o.stages, o.microBatches);
  std::vector<Node *> nodes(g.nodes().begin(), g.nodes().end());
  // Untowered nodes some tower node needs (the batch split, lr) go first.
  llvm::DenseSet<const Node *> feeding;
  for (Node *n : llvm::reverse(nodes))
    if (n->tower() >= 0 || feeding.contains(n))
      for (const Value *v : n->operands())
        if (v->producer()->tower() < 0)
          feeding.insert(v->producer());
  struct Key {
    int group = 0;
    double start = 0;
    size_t position = 0;
    bool operator<(const Key &k) const {
      return std::tie(group, start, position) < std::tie(k.group, k.start, k.position);
    }
  };
  std::vector<std::pair<Key, Node *>> keyed;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node *n = nodes[i];
    Key key{2, 0, i};
    const Node *block = anchors.lookup(n);
    if (!block && n->tower() >= 0)
      block = n;
    if (n->tower() >= 0 && isSource(*n))
      key.group = 0;
    else if (block) {
      const unsigned k = (unsigned)block->tower() % o.microBatches;
      const unsigned s = st.of.lookup(stripTowerPrefix(block->name()));
      key.group = 1;
      key.start = backward.contains(block) ? starts.backward[s][k] : starts.forward[s][k];
    } else if (feeding.contains(n))
      key.group = 0;
    keyed.push_back({key, n});
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  std::vector<Node *> order;
  for (auto &[key, n] : keyed)
    order.push_back(n);
  g.reorder(order);
}

/// Each stage's device (of pipeline 0), first forward node, forward nodes
/// and predicted seconds, as JSON for people (rule 5).
std::string describeStages(const Stages &st, const PipelineOptions &o) {
  llvm::json::Array stages;
  for (unsigned s = 0; s < o.stages; ++s)
    stages.push_back(llvm::json::Object{{"device", stageDevice(0, s, o.stages).str()},
                                        {"first", st.firstNode[s]},
                                        {"forward_nodes", (int64_t)st.nodes[s]},
                                        {"seconds", st.seconds[s]}});
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(stages));
  return os.str();
}

} // namespace

llvm::Expected<bool> pipelineStages(Module &m, const PipelineOptions &o) {
  Graph *g = m.findGraph("main");
  if (!g)
    return makeError("pipeline-stages: the module has no graph 'main'");
  if (o.stages == 0 || o.microBatches == 0 || o.pipelines == 0)
    return makeError("pipeline-stages: the plan has no stages (--strategy pipeline sets them)");
  auto sizes = towerBatches(m, "pipeline-stages");
  if (!sizes)
    return sizes.takeError();
  const unsigned towers = o.microBatches * o.pipelines;
  if (sizes->size() != towers)
    return makeError("pipeline-stages: " + llvm::Twine(o.pipelines) + " pipeline(s) of " +
                     llvm::Twine(o.microBatches) + " micro-batches need " + llvm::Twine(towers) +
                     " towers; the module has " + llvm::Twine(sizes->size()));
  const llvm::DenseSet<const Node *> backward = backwardNodes(*g);
  auto st = assignStages(*g, backward, o);
  if (!st)
    return st.takeError();
  for (const auto &entry : st->ofVariable) {
    std::vector<DeviceId> replicas;
    for (unsigned p = 0; p < o.pipelines; ++p)
      replicas.push_back(stageDevice(p, entry.second, o.stages));
    if (Variable *v = m.findVariable(entry.first()))
      v->devices = std::move(replicas);
  }
  for (Node *n : g->nodes()) {
    if (n->tower() < 0)
      continue;
    auto it = st->of.find(stripTowerPrefix(n->name()));
    if (it == st->of.end())
      return nodeError(*n, "pipeline-stages: tower 0 has no node of this name to take the stage of");
    n->setRequestedDevice(
        stageDevice((unsigned)n->tower() / o.microBatches, it->second, o.stages));
  }
  auto reductions = findReductions(*g, *st, towers);
  if (!reductions)
    return reductions.takeError();
  Anchors anchors;
  if (o.pipelines == 1) {
    for (Reduction &r : *reductions) {
      DeviceId device = stageDevice(0, r.stage, o.stages);
      llvm::SmallVector<Value *, 8> parts(r.sum->operands().begin(), r.sum->operands().end());
      if (parts.size() > 1)
        chainSum(*g, parts, device, r.sum->name(), r.sum, anchors);
      r.sum->setRequestedDevice(device);
      r.update->setRequestedDevice(device);
      setStorage(m, *r.update, {device});
    }
  } else if (auto e = allReduceStages(m, *g, *reductions, o, anchors)) {
    return withContext(std::move(e), "pipeline-stages");
  }
  orderBySchedule(*g, backward, *st, o, anchors);
  PlanInfo &plan = m.plan();
  plan.pipelineStages = o.stages;
  plan.microBatches = o.microBatches;
  plan.pipelines = o.pipelines;
  plan.pipelineSchedule = o.schedule;
  plan.pipeline = describeStages(*st, o);
  return true;
}

} // namespace graphc
