//===- PlaceDevices.cpp - Run the tools' placer, check the result -----------===//

#include "passes/PlaceDevices.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {

llvm::Error checkPlaced(const Module &m) {
  for (const Variable &v : m.variables())
    if (v.devices.empty())
      return makeError("variable '" + v.name + "' has no storage device after placement");
  for (const Graph *g : m.graphs())
    for (const Node *n : g->nodes()) {
      if (!n->assignedDevice())
        return nodeError(*n, "has no assigned device after placement");
      if (n->placementReason().empty())
        return nodeError(*n, "has no placement reason");
      if (n->op() != Op::Variable && !isVariableUpdate(n->op()))
        continue;
      const Attribute *var = n->attrs().find("var");
      const std::string *named = var ? std::get_if<std::string>(var) : nullptr;
      llvm::StringRef name = named ? llvm::StringRef(*named) : llvm::StringRef();
      const Variable *v = m.findVariable(name);
      if (v && !llvm::is_contained(v->devices, *n->assignedDevice()))
        return nodeError(*n, "runs on " + n->assignedDevice()->str() + ", but variable '" +
                                 v->name + "' is stored on " + joinDevices(v->devices));
    }
  return llvm::Error::success();
}

llvm::Expected<bool> placeDevices(Module &m, const PlacerFunction &placer) {
  if (!placer)
    return makeError("place-devices needs a cluster and kernel registry: CompileOptions::placer "
                     "is not set (graphc place sets it from --gpus or --cluster)");
  if (auto e = placer(m))
    return e;
  if (auto e = checkPlaced(m))
    return e;
  return true;
}

} // namespace graphc
