#include "ir/Equivalence.h"

#include "ir/Printer.h"

namespace graphc {

static bool differ(std::string *why, const std::string &msg) {
  if (why)
    *why = msg;
  return false;
}

static bool sameNode(const Node &a, const Node &b) {
  if (a.op() != b.op() || a.name() != b.name() || a.numOperands() != b.numOperands() ||
      a.numResults() != b.numResults() || !(a.attrs() == b.attrs()) || a.tower() != b.tower() ||
      a.requestedDevice() != b.requestedDevice() || a.assignedDevice() != b.assignedDevice() ||
      a.placementReason() != b.placementReason())
    return false;
  for (unsigned i = 0; i < a.numOperands(); ++i)
    if (a.operand(i)->name() != b.operand(i)->name())
      return false;
  for (unsigned i = 0; i < a.numResults(); ++i)
    if (a.result(i)->name() != b.result(i)->name() || a.result(i)->type() != b.result(i)->type())
      return false;
  return true;
}

bool structurallyEqual(const Module &a, const Module &b, std::string *why) {
  if (a.name() != b.name())
    return differ(why, "module names differ: " + a.name() + " vs " + b.name());
  if (!(a.plan() == b.plan()))
    return differ(why, "module meta differs");
  if (a.variables().size() != b.variables().size())
    return differ(why, "variable counts differ");
  for (size_t i = 0; i < a.variables().size(); ++i)
    if (!(a.variables()[i] == b.variables()[i]))
      return differ(why, "variable '" + a.variables()[i].name + "' differs");
  auto ga = a.graphs(), gb = b.graphs();
  if (ga.size() != gb.size())
    return differ(why, "graph counts differ");
  for (size_t g = 0; g < ga.size(); ++g) {
    if (ga[g]->name() != gb[g]->name() || ga[g]->numNodes() != gb[g]->numNodes())
      return differ(why, "graph '" + ga[g]->name() + "' differs in name or node count");
    auto na = ga[g]->nodes(), nb = gb[g]->nodes();
    for (auto ia = na.begin(), ib = nb.begin(); ia != na.end(); ++ia, ++ib)
      if (!sameNode(**ia, **ib))
        return differ(why, "node differs:\n  " + toText(**ia) + "\n  " + toText(**ib));
    if (ga[g]->outputs().size() != gb[g]->outputs().size())
      return differ(why, "graph '" + ga[g]->name() + "' outputs differ");
    for (size_t i = 0; i < ga[g]->outputs().size(); ++i)
      if (ga[g]->outputs()[i]->name() != gb[g]->outputs()[i]->name())
        return differ(why, "graph '" + ga[g]->name() + "' outputs differ");
  }
  return true;
}

} // namespace graphc
