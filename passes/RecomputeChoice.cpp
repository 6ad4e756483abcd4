//===- RecomputeChoice.cpp - Which activations to drop (Recompute.h) -------===//
//
// Greedy rounds against the measured memory plan: each round scores every
// candidate by bytes freed per second of the copies it adds (those its
// closure does not share with values already dropped), then drops the best
// ones, within the contraction depth, until about what each device lacks is
// freed; then the rewrite is tried on a copy of the module and measured.
//
//===----------------------------------------------------------------------===//

#include "passes/Recompute.h"

#include "ir/Clone.h"
#include "ir/Cost.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/StringMap.h"

namespace graphc {

namespace {

/// Values below this size are not worth a copy.
constexpr int64_t kSmallestDrop = 16 << 10;
/// The longest chain of contractions one dropped value may recompute.
constexpr unsigned kDeepest = 8;
/// Rounds of measurement before giving up.
constexpr unsigned kRounds = 48;

std::string deviceOf(const Node &n) {
  return n.assignedDevice().value_or(DeviceId::host()).str();
}

/// Convolutions and products: the copies worth counting in a chain.
bool isContraction(const Node &n) {
  return nodeCost(n).macs > 0;
}

class Chooser {
public:
  Chooser(const Module &m, const RecomputeOptions &opts)
      : g_(*m.findGraph("main")), opts_(opts), analysis_(g_), batch_(m.batch().value_or(1)) {}

  /// Candidates of the devices in `over`.
  void collect(const llvm::StringMap<int64_t> &over) {
    for (const Value *v : droppableValues(g_, analysis_))
      if (over.count(deviceOf(*v->producer())) && v->type().bytes() >= kSmallestDrop)
        candidates_.push_back(v);
  }

  /// One round: drops candidates until about `lack` bytes per device are
  /// freed; false when none could be dropped at any depth.
  bool round(const llvm::StringMap<int64_t> &lack) {
    while (true) {
      if (dropSome(lack))
        return true;
      if (depth_ >= kDeepest)
        return false;
      ++depth_;
    }
  }

  /// How many values are dropped so far.
  size_t mark() const { return order_.size(); }
  /// Takes back the values dropped after `mark`; they are not tried again.
  void rollBack(size_t mark) {
    for (size_t i = mark; i < order_.size(); ++i) {
      dropped_.erase(order_[i]);
      rejected_.insert(order_[i]);
    }
    order_.resize(mark);
    copied_.clear();
    for (const Value *v : order_) {
      llvm::DenseSet<const Node *> seen;
      std::vector<const Node *> nodes;
      analysis_.closure(v, dropped_, seen, nodes);
      copied_.insert(nodes.begin(), nodes.end());
    }
  }

  std::vector<std::string> droppedNames() const {
    std::vector<std::string> names;
    for (const Value *v : order_)
      names.push_back(v->name());
    return names;
  }

private:
  double seconds(const Node &n) const {
    return opts_.seconds ? opts_.seconds(n) : (double)nodeCost(n, batch_).flops * 1e-12;
  }

  /// Seconds of the copies `v` would add, and whether its closure (and every
  /// dropped value's that would read its copy) stays within the depth.
  std::pair<double, bool> price(const Value *v) {
    bool added = dropped_.insert(v).second;
    std::pair<double, bool> p = priceDropped(v);
    if (added)
      dropped_.erase(v);
    return p;
  }

  /// price() with `v` in dropped_.
  std::pair<double, bool> priceDropped(const Value *v) const {
    llvm::DenseSet<const Node *> seen;
    std::vector<const Node *> nodes;
    analysis_.closure(v, dropped_, seen, nodes);
    double cost = 0;
    for (const Node *n : nodes)
      if (!copied_.contains(n))
        cost += seconds(*n);
    // The chains through v: v's own, and those of dropped values downstream.
    llvm::DenseMap<const Value *, unsigned> memo;
    if (depthOf(v, dropped_, memo) > depth_)
      return {cost, false};
    llvm::SmallVector<const Value *, 16> work{v};
    llvm::DenseSet<const Value *> visited{v};
    while (!work.empty()) {
      const Value *w = work.pop_back_val();
      for (const Node *u : w->users()) {
        if (analysis_.isBackward(u) || !analysis_.mayCopy(u, w->producer()))
          continue;
        for (const auto &r : u->results()) {
          if (analysis_.isKept(r.get(), u, dropped_) || !visited.insert(r.get()).second)
            continue;
          if (dropped_.contains(r.get()) && depthOf(r.get(), dropped_, memo) > depth_)
            return {cost, false};
          work.push_back(r.get());
        }
      }
    }
    return {cost, true};
  }

  /// Contractions on the longest chain that recomputes `v` under `with`.
  unsigned depthOf(const Value *v, const llvm::DenseSet<const Value *> &with,
                   llvm::DenseMap<const Value *, unsigned> &memo) const {
    if (auto it = memo.find(v); it != memo.end())
      return it->second;
    const Node *n = v->producer();
    unsigned deepest = 0;
    for (const Value *o : n->operands())
      if (!analysis_.isKept(o, n, with))
        deepest = std::max(deepest, depthOf(o, with, memo));
    unsigned d = deepest + (isContraction(*n) ? 1 : 0);
    memo[v] = d;
    return d;
  }

  bool dropSome(const llvm::StringMap<int64_t> &lack) {
    struct Scored {
      const Value *v;
      double score;
    };
    std::vector<Scored> scored;
    for (const Value *v : candidates_)
      if (!dropped_.contains(v) && !rejected_.contains(v)) {
        double cost = price(v).first;
        scored.push_back({v, (double)v->type().bytes() / std::max(cost, 1e-12)});
      }
    // Ties: the graph's order (candidates_ is in it), deterministic.
    std::stable_sort(scored.begin(), scored.end(),
                     [](const Scored &a, const Scored &b) { return a.score > b.score; });
    llvm::StringMap<int64_t> freed;
    bool any = false;
    for (const Scored &s : scored) {
      std::string device = deviceOf(*s.v->producer());
      int64_t want = lack.lookup(device);
      if (freed.lookup(device) >= want + want / 8)
        continue;
      if (!price(s.v).second)
        continue;
      accept(s.v);
      freed[device] += s.v->type().bytes();
      any = true;
    }
    return any;
  }

  void accept(const Value *v) {
    dropped_.insert(v);
    order_.push_back(v);
    llvm::DenseSet<const Node *> seen;
    std::vector<const Node *> nodes;
    analysis_.closure(v, dropped_, seen, nodes);
    copied_.insert(nodes.begin(), nodes.end());
  }

  const Graph &g_;
  const RecomputeOptions &opts_;
  RecomputeAnalysis analysis_;
  int64_t batch_;
  unsigned depth_ = 1;
  std::vector<const Value *> candidates_, order_;
  llvm::DenseSet<const Value *> dropped_, rejected_;
  llvm::DenseSet<const Node *> copied_;
};

/// What each device lacks (need beyond capacity), for those that lack any.
llvm::Expected<llvm::StringMap<int64_t>> lacking(const Module &m, const RecomputeOptions &opts) {
  auto fits = opts.measure(m);
  if (!fits)
    return fits.takeError();
  llvm::StringMap<int64_t> lack;
  for (const DeviceFit &d : *fits)
    if (d.need > d.capacity)
      lack[d.device] = d.need - d.capacity;
  return lack;
}

/// `m` with `names` recomputed.
std::unique_ptr<Module> tryDropping(const Module &m, llvm::ArrayRef<std::string> names) {
  std::unique_ptr<Module> trial = cloneModule(m);
  std::vector<Value *> dropped;
  for (const std::string &name : names)
    dropped.push_back(trial->main().findValue(name));
  recomputeValues(trial->main(), dropped);
  return trial;
}

} // namespace

llvm::Expected<std::vector<std::string>> chooseRecompute(const Module &m,
                                                         const RecomputeOptions &opts) {
  if (opts.mode == RecomputeMode::Off)
    return std::vector<std::string>{};
  if (!opts.measure)
    return makeError("recompute: no memory measure (a placed compile sets one)");
  auto lack = lacking(m, opts);
  if (!lack)
    return lack.takeError();
  if (lack->empty())
    return std::vector<std::string>{};
  if (opts.accumulate > 1)
    return makeError("--recompute auto with --accumulate " + llvm::Twine(opts.accumulate) +
                     ": the recomputation rewrites graph main only, not the micro-batches' graph");
  Chooser chooser(m, opts);
  chooser.collect(*lack);
  auto total = [](const llvm::StringMap<int64_t> &l) {
    int64_t sum = 0;
    for (const auto &e : l)
      sum += e.getValue();
    return sum;
  };
  for (unsigned r = 0; r < kRounds; ++r) {
    size_t mark = chooser.mark();
    if (!chooser.round(*lack))
      break;
    std::vector<std::string> names = chooser.droppedNames();
    auto after = lacking(*tryDropping(m, names), opts);
    if (!after)
      return after.takeError();
    if (after->empty())
      return names;
    // A round that does not bring the devices closer (the peak moved into
    // the backward pass, where recomputed segments live) is taken back.
    if (total(*after) < total(*lack))
      *lack = std::move(*after);
    else
      chooser.rollBack(mark);
  }
  return std::vector<std::string>{}; // cannot fit: the placement's check says so
}

} // namespace graphc
