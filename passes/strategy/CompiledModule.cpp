#include "passes/strategy/CompiledModule.h"

#include "ir/Clone.h"
#include "ir/Diagnostics.h"
#include "ir/Verifier.h"
#include "placement/analysis/MemoryNeeds.h"

namespace graphc {

bool isCompiledForTraining(const Module &m) {
  return m.plan().training.value_or(false) && m.findGraph("forward") != nullptr;
}

bool isPlaced(const Module &m) {
  for (const Node *n : m.findGraph("main")->nodes())
    if (n->assignedDevice())
      return true;
  return false;
}

std::unique_ptr<Module> runnablePart(const Module &compiled) {
  std::unique_ptr<Module> m = cloneModule(compiled);
  m->removeGraph("forward");
  return m;
}

llvm::Error checkPlanFitsCluster(const Module &compiled) {
  auto needs = memoryNeeds(*runnablePart(compiled));
  if (!needs)
    return needs.takeError();
  return checkFits(*needs);
}

llvm::Expected<std::unique_ptr<Module>> forwardOf(const Module &compiled) {
  const Graph *fwd = compiled.findGraph("forward");
  if (!fwd)
    return makeError("module '" + compiled.name() + "' keeps no forward graph");
  auto m = std::make_unique<Module>(compiled.name());
  m->plan().seed = compiled.plan().seed;
  m->plan().source = compiled.plan().source;
  m->plan().exporterFolded = compiled.plan().exporterFolded;
  Graph &g = m->main();
  // Only the variables the forward graph reads, with their current values.
  for (const Node *n : fwd->nodes())
    if (n->op() == Op::Variable && !m->findVariable(n->attrs().getString("var"))) {
      Variable v = *compiled.findVariable(n->attrs().getString("var"));
      v.devices.clear();
      m->addVariable(std::move(v));
    }
  g.setOutputs(cloneGraphInto(*fwd, g));
  for (Node *n : g.nodes()) {
    n->setAssignedDevice(std::nullopt);
    n->setPlacementReason("");
  }
  if (auto e = verify(*m))
    return e;
  return m;
}

} // namespace graphc
