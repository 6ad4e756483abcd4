//===- LossScaling.cpp - Dynamic loss scaling -----------------------------===//
//
// The scale enters at each cross-entropy gradient's loss gradient (a scalar,
// so one multiply per tower) and leaves in the Apply* kernels, which divide
// by it; between the two every gradient carries it.
//
//===----------------------------------------------------------------------===//

#include "passes/LossScaling.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "passes/TowerReplication.h"

#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <map>

namespace graphc {
namespace {

/// One device's updates, in graph order.
struct Group {
  std::optional<DeviceId> device; ///< the applies' requested device
  int tower = -1;
  std::vector<Node *> applies;
};

class Scaler {
public:
  Scaler(Module &m, Graph &main, const LossScaleOptions &opts) : m_(m), main_(main), opts_(opts) {}

  llvm::Error run() {
    collectGroups();
    if (groups_.empty())
      return makeError("loss-scaling: graph 'main' has no optimizer update (Apply*); run "
                       "add-optimizer first");
    // Everything is checked before the module changes.
    for (llvm::StringRef name : {kLossScaleVar, kGoodStepsVar, kSkippedStepsVar})
      if (m_.findVariable(name))
        return makeError("loss-scaling: variable '" + name + "' exists already");
    if (llvm::none_of(main_.nodes(),
                      [](const Node *n) { return n->op() == Op::SoftmaxCrossEntropyGrad; }))
      return makeError("loss-scaling: graph 'main' has no cross-entropy gradient "
                       "(SoftmaxCrossEntropyGrad) to scale; run add-loss and autodiff first");
    const Variable *first = m_.findVariable(groups_[0].applies[0]->attrs().getString("var"));
    mirrored_ = first && first->devices.size() > 1;
    addVariables();
    scaleLossGradients();
    if (auto e = decide())
      return e;
    m_.plan().lossScale = opts_.initial;
    m_.plan().lossScaleInterval = opts_.growthInterval;
    return llvm::Error::success();
  }

private:
  void collectGroups() {
    std::map<std::optional<DeviceId>, size_t> index;
    for (Node *n : main_.nodes()) {
      if (!isApplyRule(n->op()))
        continue;
      auto [it, added] = index.try_emplace(n->requestedDevice(), groups_.size());
      if (added)
        groups_.push_back({n->requestedDevice(), n->tower(), {}});
      groups_[it->second].applies.push_back(n);
    }
  }

  void addVariables() {
    std::vector<DeviceId> devices;
    if (mirrored_) {
      for (const Group &g : groups_)
        if (g.device) // mirrored updates all request their towers' devices
          devices.push_back(*g.device);
    } else if (groups_[0].device) {
      devices.push_back(*groups_[0].device);
    }
    for (auto [name, value] :
         {std::pair{kLossScaleVar, opts_.initial}, {kGoodStepsVar, 0.0}, {kSkippedStepsVar, 0.0}}) {
      Variable v;
      v.name = name.str();
      v.type = TensorType(DType::F32, {});
      v.kind = VarKind::State;
      v.init = Initializer{"constant", {value}};
      v.devices = devices;
      m_.addVariable(std::move(v));
    }
  }

  /// Where a node of tower `tower` reads the scale.
  std::optional<DeviceId> scaleDevice(int tower) const {
    if (mirrored_ && tower >= 0)
      return towerDevice(tower);
    return groups_[0].device;
  }

  void scaleLossGradients() {
    for (Graph *g : m_.graphs()) {
      std::vector<std::pair<Node *, Node *>> moves;
      std::vector<Node *> grads;
      for (Node *n : g->nodes())
        if (n->op() == Op::SoftmaxCrossEntropyGrad)
          grads.push_back(n);
      for (Node *n : grads) {
        Value *dloss = n->operand(2);
        Builder rb = Builder::like(*n);
        rb.setRequestedDevice(scaleDevice(n->tower()));
        Value *scale = rb.variable(kLossScaleVar);
        Builder b = Builder::like(*n);
        Value *scaled = b.create(Op::Mul, {dloss, scale}, {}, n->name() + "/loss_scaled");
        n->setOperand(2, scaled);
        moves.push_back({scale->producer(), dloss->producer()});
        moves.push_back({scaled->producer(), scale->producer()});
      }
      g->moveAfter(moves);
    }
  }

  /// The checks, the steps and the Apply* nodes' third operand.
  llvm::Error decide() {
    llvm::DenseMap<const Node *, unsigned> pos;
    unsigned i = 0;
    for (const Node *n : main_.nodes())
      pos[n] = i++;
    std::vector<std::pair<Node *, Node *>> moves;
    auto lastProducer = [&](llvm::ArrayRef<Value *> values) {
      Node *last = values[0]->producer();
      for (Value *v : values)
        if (pos.lookup(v->producer()) > pos.lookup(last))
          last = v->producer();
      return last;
    };
    std::vector<Value *> checks;
    Node *latest = nullptr, *latestAnchor = nullptr; // the check whose anchor comes last
    for (const Group &g : groups_) {
      std::vector<Value *> grads;
      for (Node *a : g.applies)
        grads.push_back(a->operand(0));
      Builder b = Builder::like(*g.applies[0]);
      Value *check = b.create(Op::CheckFinite, grads, {}, prefix(g) + "loss_scale/check");
      Node *anchor = lastProducer(grads);
      if (!latestAnchor || pos.lookup(anchor) > pos.lookup(latestAnchor)) {
        latest = check->producer();
        latestAnchor = anchor;
      }
      moves.push_back({check->producer(), anchor});
      checks.push_back(check);
    }
    auto step = [&](const Group &g, Value *check) {
      Builder b = Builder::like(*g.applies[0]);
      Attrs a;
      a.set("var", kLossScaleVar.str());
      a.set("slots", Strings{kGoodStepsVar.str(), kSkippedStepsVar.str()});
      a.set("growth_interval", opts_.growthInterval);
      Node *s =
          b.createNode(Op::LossScaleStep, {check}, std::move(a), prefix(g) + "loss_scale/step");
      moves.push_back({s, check->producer()});
      return s->result(0);
    };
    if (mirrored_) {
      for (size_t k = 0; k < groups_.size(); ++k) {
        Value *decision = step(groups_[k], checks[k]);
        for (Node *a : groups_[k].applies)
          a->setOperands({a->operand(0), a->operand(1), decision});
      }
    } else {
      Value *all = checks[0];
      if (checks.size() > 1) {
        Builder b = Builder::like(*groups_[0].applies[0]);
        all = b.create(Op::CheckFinite, checks, {}, "loss_scale/check_all");
        moves.push_back({all->producer(), latest});
      }
      Value *decision = step(groups_[0], all);
      for (const Group &g : groups_)
        for (Node *a : g.applies)
          a->setOperands({a->operand(0), a->operand(1), decision});
    }
    main_.moveAfter(moves);
    // Updates placed before their gradients were all ready (mirrored buckets)
    // now wait for the decision: restore a topological order.
    if (!main_.sortTopologically())
      return makeError("loss-scaling: graph 'main' has a cycle after the checks were added");
    return llvm::Error::success();
  }

  std::string prefix(const Group &g) const {
    return mirrored_ && g.tower >= 0 ? "tower_" + std::to_string(g.tower) + "/" : "";
  }

  Module &m_;
  Graph &main_;
  const LossScaleOptions &opts_;
  std::vector<Group> groups_;
  bool mirrored_ = false;
};

} // namespace

llvm::Expected<double> parseLossScale(llvm::StringRef text) {
  llvm::StringRef t = text.trim();
  if (t == "off")
    return 0.0;
  double s = 0;
  if (t.getAsDouble(s) || !std::isfinite(s) || s < 1)
    return makeError("--loss-scale " + text +
                     ": must be 'off' or the initial scale, a number >= 1 (e.g. 65536)");
  return s;
}

llvm::Expected<bool> addLossScaling(Module &m, const LossScaleOptions &opts) {
  if (opts.initial == 0)
    return false;
  if (!std::isfinite(opts.initial) || opts.initial < 1)
    return makeError("loss-scaling: the initial scale must be a finite number >= 1, got " +
                     llvm::Twine(std::to_string(opts.initial)));
  if (opts.growthInterval < 1)
    return makeError("loss-scaling: the growth interval must be at least 1 step, got " +
                     llvm::Twine(opts.growthInterval));
  if (m.plan().lossScale)
    return makeError("loss-scaling: module '" + m.name() + "' scales its loss already");
  for (const Variable &v : m.variables())
    if (v.sharded)
      return makeError("loss-scaling: the optimizer state is sharded (--shard-optimizer), so "
                       "each replica would check only its piece of the gradients for overflow");
  Graph *main = m.findGraph("main");
  if (!main)
    return makeError("loss-scaling: the module has no graph 'main'");
  Scaler s(m, *main, opts);
  if (auto e = s.run())
    return e;
  return true;
}

} // namespace graphc
