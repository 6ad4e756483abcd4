#include "tools/driver/StepBreakdownTable.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

#include <map>
#include <string>
#include <vector>

namespace graphc {

namespace {

/// The step's column, then each device's.
struct Column {
  std::string name;
  const PartTimes *times;
};

void printRow(llvm::raw_ostream &os, llvm::StringRef label, llvm::ArrayRef<Column> columns,
              llvm::function_ref<double(const PartTimes &)> us) {
  os << llvm::format("  %-26s", label.str().c_str());
  for (const Column &c : columns) {
    double total = c.times->totalUs();
    double v = us(*c.times);
    os << llvm::format(" %10.2f %5.1f%%", v / 1e3, total > 0 ? 100 * v / total : 0.0);
  }
  os << "\n";
}

std::string stepsCovered(const StepBreakdown &b) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (b.averagedSteps == 1 && b.profiledSteps == 1)
    return "the one profiled step";
  os << "mean of steps " << b.firstAveraged + 1 << "-" << b.lastAveraged + 1;
  if (b.profiledSteps > b.averagedSteps)
    os << llvm::format(" (the first profiled step, with one-time setup, took %.2f ms)",
                       b.firstStepUs / 1e3);
  return os.str();
}

} // namespace

void printStepBreakdown(const StepBreakdown &b, llvm::raw_ostream &os, bool opRows) {
  if (b.averagedSteps == 0)
    return;
  std::vector<Column> columns{{"step", &b.step}};
  for (const auto &[name, times] : b.devices)
    columns.push_back({name, &times});
  os << "step breakdown, ms per step and % of the step, " << stepsCovered(b) << ":\n";
  os << llvm::format("  %-26s", (const char *)"part");
  for (const Column &c : columns)
    os << llvm::format(" %17s", c.name.c_str());
  os << "\n";
  for (unsigned p = 0; p < kBreakdownParts; ++p) {
    auto part = (BreakdownPart)p;
    printRow(os, breakdownPartName(part), columns, [&](const PartTimes &t) { return t[part]; });
    if (part != BreakdownPart::Kernel || !opRows)
      continue;
    // Every column's op types: where kernels of two devices overlap, the
    // step's column names one of them only, and each device's rows must
    // still add up to its kernels row.
    std::map<std::string, double> byOp;
    for (const Column &c : columns)
      for (const auto &[op, us] : c.times->kernelUsByOp)
        byOp.try_emplace(op, 0.0);
    for (const auto &[op, us] : b.step.kernelUsByOp)
      byOp[op] = us;
    std::vector<std::pair<std::string, double>> ops(byOp.begin(), byOp.end());
    llvm::sort(ops, [](auto &x, auto &y) {
      return x.second != y.second ? x.second > y.second : x.first < y.first;
    });
    for (auto &[op, us] : ops)
      printRow(os, "  " + op, columns, [&, name = op](const PartTimes &t) {
        auto it = t.kernelUsByOp.find(name);
        return it == t.kernelUsByOp.end() ? 0.0 : it->second;
      });
  }
  printRow(os, "total", columns, [](const PartTimes &t) { return t.totalUs(); });
  if (b.devices.size() < 2)
    return;
  const auto *busiest = &b.devices.front();
  for (const auto &d : b.devices)
    if (d.second[BreakdownPart::Kernel] > busiest->second[BreakdownPart::Kernel])
      busiest = &d;
  os << llvm::format("slowest device: %s (kernels %.2f ms per step)\n", busiest->first.c_str(),
                     busiest->second[BreakdownPart::Kernel] / 1e3);
}

} // namespace graphc
