//===- PlacementExplain.cpp - The `graphc place --explain` table ------------===//
//
// One row per node in graph order; columns are as wide as their widest cell
// so the table reads in a terminal and greps by node name. Empty requests
// print as "-".
//
//===----------------------------------------------------------------------===//

#include "placement/Placer.h"

#include <array>

namespace graphc {

void printPlacementExplanation(const Module &m, llvm::raw_ostream &os) {
  using Row = std::array<std::string, 5>;
  for (const Graph *g : m.graphs()) {
    std::vector<Row> rows{{"node", "op", "requested", "assigned", "reason"}};
    for (const Node *n : g->nodes()) {
      auto orDash = [](const std::string &s) { return s.empty() ? std::string("-") : s; };
      rows.push_back({n->name(), opName(n->op()).str(), orDash(deviceText(n->requestedDevice())),
                      orDash(deviceText(n->assignedDevice())), orDash(n->placementReason())});
    }
    std::array<size_t, 5> width{};
    for (const Row &r : rows)
      for (unsigned c = 0; c < 4; ++c)
        width[c] = std::max(width[c], r[c].size());
    if (m.graphs().size() > 1)
      os << "graph " << g->name() << ":\n";
    for (const Row &r : rows) {
      for (unsigned c = 0; c < 4; ++c) {
        os << r[c];
        os.indent(width[c] - r[c].size() + 2);
      }
      os << r[4] << '\n';
    }
  }
}

} // namespace graphc
