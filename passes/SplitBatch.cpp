//===- SplitBatch.cpp - Batch split plans, split-batch, concat-outputs ------===//
//
// The plan is computed with one rule for every policy: a share is "exact" when
// B·w_t/Σw is an integer for every tower; error and drop insist on exact
// shares (drop lowers B until they are), uneven apportions by largest
// remainders. Equal weights make that the usual "first B mod N towers get one
// more".
//
//===----------------------------------------------------------------------===//

#include "passes/SplitBatch.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "passes/TowerReplication.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <map>
#include <numeric>

namespace graphc {
namespace {

using Sizes = llvm::SmallVector<int64_t, 8>;

/// Groups keyed by name, in first-seen order.
template <typename V>
using NamedGroups = llvm::MapVector<std::string, V, std::map<std::string, unsigned>>;

std::string joined(llvm::ArrayRef<int64_t> v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s.append(i ? "," : "").append(std::to_string(v[i]));
  return s;
}

std::string joined(llvm::ArrayRef<double> v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s.append(i ? "," : "")
        .append(v[i] == std::floor(v[i]) && std::abs(v[i]) < 1e15 ? std::to_string((int64_t)v[i])
                                                                  : formatDouble(v[i]));
  return s;
}

/// Largest-remainder apportionment of `batch` by `weights` (ties to the lower
/// tower).
Sizes apportion(int64_t batch, llvm::ArrayRef<double> weights) {
  double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  Sizes sizes(weights.size());
  std::vector<std::pair<double, size_t>> fractions;
  int64_t given = 0;
  for (size_t t = 0; t < weights.size(); ++t) {
    double share = (double)batch * weights[t] / total;
    // Shares within rounding of an integer are that integer.
    double whole = std::floor(share + 1e-9);
    sizes[t] = (int64_t)whole;
    given += sizes[t];
    fractions.emplace_back(std::max(0.0, share - whole), t);
  }
  std::stable_sort(fractions.begin(), fractions.end(),
                   [](const auto &a, const auto &b) { return a.first > b.first; });
  for (size_t i = 0; given < batch; ++i, ++given)
    ++sizes[fractions[i % fractions.size()].second];
  return sizes;
}

/// The shares when every one is an integer.
std::optional<Sizes> exactShares(int64_t batch, llvm::ArrayRef<double> weights) {
  double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  Sizes sizes;
  for (double w : weights) {
    double share = (double)batch * w / total;
    double rounded = std::round(share);
    if (std::abs(share - rounded) > 1e-9 * std::max(1.0, share))
      return std::nullopt;
    sizes.push_back((int64_t)rounded);
  }
  return sizes;
}

std::optional<int64_t> largestExactBatch(int64_t batch, llvm::ArrayRef<double> weights) {
  for (int64_t b = batch; b > 0; --b)
    if (exactShares(b, weights))
      return b;
  return std::nullopt;
}

/// The node whose result `v` is, named without its tower prefix.
std::string untoweredName(const Value *v) {
  return stripTowerPrefix(v->name()).str();
}

} // namespace

llvm::Expected<BatchSplit> planBatchSplit(int64_t batch, const TowerOptions &opts) {
  int towers = opts.towers;
  if (towers < 1)
    return makeError("--towers must be at least 1, got " + llvm::Twine(towers));
  if (batch < 1)
    return makeError("the global batch must be at least 1, got " + llvm::Twine(batch));
  std::vector<double> weights(towers, 1.0);
  if (opts.split.kind == SplitSpec::Auto)
    return makeError(
        "--split auto shares the batch by the speeds of the towers' devices, which "
        "come from the cluster: give --cluster FILE (or --gpus N) to place the towers");
  const std::vector<double> &given = opts.split.weights;
  bool weighted = opts.split.kind == SplitSpec::Weights;
  if (weighted) {
    if ((int)given.size() != towers)
      return makeError("--split gives " + llvm::Twine(given.size()) + " weights for " +
                       llvm::Twine(towers) + " towers");
    double total = 0;
    for (double w : given) {
      if (!(w >= 0) || !std::isfinite(w))
        return makeError("--split weights must be finite and non-negative, got " + joined(given));
      total += w;
    }
    if (total <= 0)
      return makeError("--split weights must not all be zero");
    weights = given;
  }
  RemainderPolicy policy = opts.remainder;

  BatchSplit split;
  if (policy == RemainderPolicy::Uneven) {
    split.sizes = apportion(batch, weights);
  } else if (auto exact = exactShares(batch, weights)) {
    split.sizes = *exact;
  } else if (policy == RemainderPolicy::Drop && largestExactBatch(batch, weights)) {
    split.sizes = *exactShares(*largestExactBatch(batch, weights), weights);
  } else {
    llvm::Twine what =
        batch < towers && !weighted ? " is smaller than the " : " does not split evenly over ";
    std::string weightText = weighted ? " with weights " + joined(weights) : std::string();
    std::optional<int64_t> dropped = largestExactBatch(batch, weights);
    std::string dropDoes = dropped ? "a global batch of " + std::to_string(*dropped)
                                   : std::string("impossible: no sample would be left");
    return makeError("the global batch of " + llvm::Twine(batch) + what + llvm::Twine(towers) +
                     " towers" + weightText + " (--remainder " + modeName(policy) +
                     "); the remainder policies are error (refuse), drop (" + dropDoes +
                     ") and uneven (tower batches " + joined(apportion(batch, weights)) + ")");
  }
  split.global = std::accumulate(split.sizes.begin(), split.sizes.end(), int64_t(0));
  return split;
}

llvm::Expected<bool> splitBatch(Module &m) {
  Graph *g = m.findGraph("main");
  if (!g || !m.plan().towerBatches)
    return false;
  auto sizes = towerBatches(m, "split-batch");
  if (!sizes)
    return sizes.takeError();
  int64_t global = std::accumulate(sizes->begin(), sizes->end(), int64_t(0));

  NamedGroups<llvm::SmallVector<Node *, 8>> groups;
  for (Node *n : g->nodes()) {
    if (n->op() != Op::Input || n->tower() < 0)
      continue;
    int tower = -1;
    llvm::StringRef name = stripTowerPrefix(n->name(), &tower);
    const TensorType &t = n->result()->type();
    if (tower != n->tower() || tower >= (int)sizes->size() || t.rank() < 1 ||
        t.shape[0] != (*sizes)[tower])
      return nodeError(*n,
                       "split-batch: a tower input must be named tower_<t>/<name> by its "
                       "tower t and hold that tower's batch of " +
                           llvm::Twine(tower >= 0 && tower < (int)sizes->size() ? (*sizes)[tower]
                                                                                : int64_t(-1)));
    groups[name.str()].push_back(n);
  }
  Node *anchor = nullptr; // the global inputs go first, in the order of their groups
  for (auto &[name, members] : groups) {
    if (g->findNode(name))
      return nodeError(*g->findNode(name), "split-batch: the name is needed for the global input "
                                           "of the towers' '" +
                                               members.front()->name() + "'");
    TensorType t = members.front()->result()->type();
    t.shape[0] = global;
    Builder b(*g);
    b.setRequestedDevice(DeviceId::host());
    Value *in = b.input(name, t);
    Attrs a;
    a.set("sizes", Ints(sizes->begin(), sizes->end()));
    Node *split = b.createNode(Op::SplitBatch, {in}, std::move(a), name + "/split");
    if (anchor) {
      g->moveAfter(in->producer(), anchor);
    } else if (Node *front = *g->nodes().begin(); front != in->producer()) {
      g->moveAfter(in->producer(), front);
      g->moveAfter(front, in->producer());
    }
    g->moveAfter(split, in->producer());
    anchor = split;
    for (Node *member : members) {
      member->result()->replaceAllUsesWith(split->result(member->tower()));
      g->erase(member);
    }
  }
  return !groups.empty();
}

llvm::Expected<bool> concatOutputs(Module &m) {
  Graph *g = m.findGraph("main");
  if (!g || !m.plan().towerBatches)
    return false;
  auto sizes = towerBatches(m, "concat-outputs");
  if (!sizes)
    return sizes.takeError();
  unsigned nonEmpty = llvm::count_if(*sizes, [](int64_t s) { return s > 0; });

  // Untowered outputs stay; towered ones gather under their untowered name.
  NamedGroups<llvm::SmallVector<Value *, 8>> groups;
  for (Value *v : g->outputs())
    groups[v->producer()->tower() < 0 ? v->name() : untoweredName(v)].push_back(v);
  bool changed = false;
  llvm::SmallVector<Value *, 4> outputs;
  Builder b(*g);
  b.setRequestedDevice(DeviceId::host());
  for (auto &[name, parts] : groups) {
    if (parts.front()->producer()->tower() < 0) {
      outputs.append(parts.begin(), parts.end());
      continue;
    }
    if (parts.size() != nonEmpty)
      return makeError("concat-outputs: output '" + name + "' comes from " +
                       llvm::Twine(parts.size()) + " towers, expected one from each of the " +
                       llvm::Twine(nonEmpty) + " non-empty towers");
    bool scalar = parts.front()->type().rank() == 0;
    for (Value *p : parts) {
      int tower = p->producer()->tower();
      if (!scalar && (p->type().rank() == 0 || p->type().shape[0] != (*sizes)[tower]))
        return nodeError(*p->producer(),
                         "concat-outputs: output '" + p->name() + "' " + toString(p->type()) +
                             " is neither a scalar to sum nor batched along its first dimension "
                             "(tower " +
                             llvm::Twine(tower) + " holds " + llvm::Twine((*sizes)[tower]) +
                             " samples)");
    }
    outputs.push_back(b.create(scalar ? Op::AddN : Op::ConcatBatch, parts, {}, name));
    changed = true;
  }
  g->setOutputs(outputs);
  return changed;
}

} // namespace graphc
