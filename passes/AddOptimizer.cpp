//===- AddOptimizer.cpp - One update node per parameter ---------------------===//
//
// Each optimizer is a row: its op, its slot suffixes and its hyper-parameter
// attributes. The update reads the gradient node found by `grad_of`, so it
// follows whatever a later pass made of the gradient (aggregation) as long as
// that pass keeps the attribute on the final gradient.
//
//===----------------------------------------------------------------------===//

#include "passes/AddOptimizer.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/StringMap.h"

namespace graphc {
namespace {

struct OptimizerForm {
  Op op;
  std::vector<std::string> slots;
  Attrs hyper;
};

llvm::Expected<OptimizerForm> optimizerForm(const OptimizerOptions &o) {
  OptimizerForm f;
  if (o.optimizer == "sgd") {
    f.op = Op::ApplySGD;
    f.hyper.set("weight_decay", o.weightDecay);
  } else if (o.optimizer == "momentum") {
    f.op = Op::ApplyMomentum;
    f.slots = {"momentum"};
    f.hyper.set("momentum", o.momentum);
    f.hyper.set("nesterov", int64_t(o.nesterov));
    f.hyper.set("weight_decay", o.weightDecay);
  } else if (o.optimizer == "rmsprop") {
    f.op = Op::ApplyRMSProp;
    f.slots = {"rms", "momentum"};
    f.hyper.set("decay", o.rmspropDecay);
    f.hyper.set("momentum", o.rmspropMomentum);
    f.hyper.set("epsilon", o.rmspropEpsilon);
  } else if (o.optimizer == "adam") {
    f.op = Op::ApplyAdam;
    f.slots = {"adam_m", "adam_v"};
    f.hyper.set("beta1", o.adamBeta1);
    f.hyper.set("beta2", o.adamBeta2);
    f.hyper.set("epsilon", o.adamEpsilon);
    f.hyper.set("weight_decay", o.weightDecay);
  } else {
    return makeError("add-optimizer: unknown optimizer '" + o.optimizer +
                     "'; known: sgd, momentum, rmsprop, adam");
  }
  return f;
}

} // namespace

llvm::Expected<bool> addOptimizer(Module &m, const OptimizerOptions &opts) {
  Graph *g = m.findGraph("main");
  if (!g)
    return makeError("add-optimizer: the module has no graph 'main'");
  auto form = optimizerForm(opts);
  if (!form)
    return form.takeError();

  llvm::StringMap<Node *> gradOf;
  for (Node *n : g->nodes()) {
    if (!n->attrs().has("grad_of"))
      continue;
    std::string var = n->attrs().getString("grad_of");
    auto [it, inserted] = gradOf.try_emplace(var, n);
    if (!inserted)
      return nodeError(*n, "add-optimizer: variable '" + var +
                               "' has two gradient nodes, this one and '" + it->second->name() +
                               "'");
    const Variable *v = m.findVariable(var);
    if (!v || !v->trainable())
      return nodeError(*n, "add-optimizer: grad_of names '" + var +
                               "', which is not a trainable variable");
    if (n->numResults() != 1 || n->result()->type() != v->type)
      return nodeError(*n, "add-optimizer: the gradient of '" + var + "' must have type " +
                               toString(v->type));
  }
  if (gradOf.empty())
    return makeError("add-optimizer: no gradient nodes (attribute grad_of) in graph '" + g->name() +
                     "'; run autodiff first");

  // Module order: deterministic, and the same order a checkpoint lists.
  std::vector<std::pair<std::string, TensorType>> params;
  for (const Variable &v : m.variables())
    if (gradOf.count(v.name))
      params.emplace_back(v.name, v.type);
  // Check every slot name before changing anything.
  for (auto &[name, type] : params)
    for (const std::string &suffix : form->slots)
      if (m.findVariable(name + "." + suffix))
        return makeError("add-optimizer: cannot create optimizer slot '" + name + "." + suffix +
                         "': a variable of that name exists");
  Builder b(*g);
  TensorType lrType(DType::F32, {});
  Node *existingLr = g->findNode("lr");
  if (existingLr && (existingLr->op() != Op::Input || existingLr->result()->type() != lrType))
    return nodeError(*existingLr, "add-optimizer needs the name 'lr' for an Input of type f32[]");
  Value *lr = existingLr ? existingLr->result() : b.input("lr", lrType);
  for (auto &[name, type] : params) {
    Strings slots;
    for (const std::string &suffix : form->slots) {
      std::string slotName = name + "." + suffix;
      Variable slot;
      slot.name = slotName;
      slot.type = type;
      slot.kind = VarKind::Slot;
      slot.init = {"zeros", {}};
      m.addVariable(std::move(slot));
      slots.push_back(slotName);
    }
    Attrs a = form->hyper;
    a.set("var", name);
    if (!slots.empty())
      a.set("slots", slots);
    Node *grad = gradOf[name];
    b.setTower(grad->tower());
    b.setRequestedDevice(grad->requestedDevice());
    // Hyper-parameters come from the user (--momentum nan): the update's
    // attribute checks say what is wrong with them.
    auto update = b.tryCreate(form->op, {grad->result(), lr}, std::move(a), "update/" + name);
    if (!update)
      return withContext(update.takeError(), "add-optimizer");
  }
  m.plan().optimizer = opts.optimizer;
  return true;
}

} // namespace graphc
