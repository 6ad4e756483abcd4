#include "tools/driver/Profile.h"

#include "ir/Cost.h"
#include "ir/OutputFile.h"
#include "kernels/cpu/CpuIsa.h"
#include "tools/driver/StepBreakdownTable.h"

#include "llvm/Support/Format.h"

#include <map>

namespace graphc {

void printProfile(const Executor &ex, llvm::raw_ostream &os) {
  std::vector<NodeProfile> nodes = ex.profile();
  struct OpRow {
    double seconds = 0;
    int64_t nodes = 0;
    ReorderCount reorders;
    int64_t macs = 0; ///< per step: multiply-accumulates of contractions
  };
  std::map<std::string, OpRow> byOp;
  double total = 0;
  int64_t runs = 1;
  ReorderCount reorders;
  double contractionSeconds = 0;
  int64_t contractionMacs = 0;
  for (const NodeProfile &p : nodes) {
    OpRow &row = byOp[opName(p.node->op()).str()];
    row.seconds += p.seconds;
    ++row.nodes;
    // The executor's graph has its towers' batch in every shape.
    const int64_t macs = nodeCost(*p.node).macs;
    row.macs += macs;
    if (macs) {
      contractionMacs += macs;
      contractionSeconds += p.seconds;
    }
    row.reorders.reorders += p.reorders.reorders;
    row.reorders.bytes += p.reorders.bytes;
    reorders.reorders += p.reorders.reorders;
    reorders.bytes += p.reorders.bytes;
    total += p.seconds;
    runs = std::max(runs, p.runs);
  }
  std::vector<std::pair<std::string, OpRow>> ops(byOp.begin(), byOp.end());
  llvm::sort(ops, [](auto &a, auto &b) {
    return a.second.seconds != b.second.seconds ? a.second.seconds > b.second.seconds
                                                : a.first < b.first;
  });
  // Every step runs the same kernels: the reorders per step are their mean.
  const double steps = (double)runs;
  os << "cpu: " << describeCpuIsa() << "\n";
  os << llvm::format("per-op time over %lld profiled steps (%.3f s per step); layout copies "
                     "inside kernels: %.1f reorders, %.1f MB per step\n",
                     (long long)runs, total / runs, reorders.reorders / steps,
                     reorders.bytes / steps / 1e6);
  // GFLOP/s: 2 per multiply-accumulate of the op's definition (a Winograd
  // convolution does fewer, so it can exceed the CPU's peak).
  auto gflops = [&](int64_t macs, double seconds) {
    return seconds > 0 ? 2.0 * (double)macs * steps / seconds / 1e9 : 0.0;
  };
  if (contractionMacs)
    os << llvm::format("contractions (convolutions, matrix products): %.4g GFLOP per step at "
                       "%.1f GFLOP/s\n",
                       2e-9 * (double)contractionMacs, gflops(contractionMacs, contractionSeconds));
  os << "  op                            ms/step   share  nodes  reorders/step  GFLOP/s\n";
  for (auto &[op, v] : ops) {
    os << llvm::format("  %-26s %10.2f %6.1f%% %6lld %14.1f", op.c_str(), 1e3 * v.seconds / runs,
                       total ? 100 * v.seconds / total : 0.0, (long long)v.nodes,
                       v.reorders.reorders / steps);
    if (v.macs)
      os << llvm::format(" %8.1f", gflops(v.macs, v.seconds));
    os << "\n";
  }
  llvm::sort(nodes, [](const NodeProfile &a, const NodeProfile &b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.node->name() < b.node->name();
  });
  os << "slowest nodes\n";
  for (size_t i = 0; i < nodes.size() && i < 15; ++i)
    os << llvm::format("  %10.2f ms  %-18s %s\n", 1e3 * nodes[i].seconds / runs,
                       opName(nodes[i].node->op()).str().c_str(), nodes[i].node->name().c_str());
  printImplementations(ex, os);
  for (const FusedGroup &g : ex.fusedGroups())
    os << "fused update: " << g.nodes.size() << " " << opName(g.nodes.front()->op())
       << " nodes in one launch on " << g.device << "\n";
  printStepBreakdown(ex.trace().breakdown(), os, /*opRows=*/true);
}

void printImplementations(const Executor &ex, llvm::raw_ostream &os) {
  // op -> "kind implementation" -> nodes that ran it.
  std::map<std::string, std::map<std::string, int64_t>> byOp;
  for (const NodePrimitives &np : ex.primitives())
    for (const PrimitiveInfo &p : np.primitives)
      if (p.kind != "reorder")
        ++byOp[opName(np.node->op()).str()][p.kind + " " + p.implementation];
  if (byOp.empty())
    return;
  os << "library implementations (nodes)\n";
  for (auto &[op, impls] : byOp) {
    std::string line;
    for (auto &[impl, count] : impls)
      line += (line.empty() ? "" : ", ") + impl + " " + std::to_string(count);
    os << llvm::format("  %-26s %s\n", op.c_str(), line.c_str());
  }
}

llvm::Error writeProfile(const Executor &ex, llvm::StringRef path) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printProfile(ex, os);
  return writeOutputFile(path, os.str());
}

} // namespace graphc
