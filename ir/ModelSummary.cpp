//===- ModelSummary.cpp - Module statistics for `graphc inspect` -----------===//

#include "ir/ModelSummary.h"

#include "ir/MemoryLimit.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace graphc {
namespace {

VariableStats &statsFor(ModelSummary &s, VarKind k) {
  switch (k) {
  case VarKind::Param:
    return s.params;
  case VarKind::State:
    return s.state;
  case VarKind::Slot:
    return s.slots;
  case VarKind::Accumulator:
    return s.accumulators;
  }
  llvm_unreachable("unknown variable kind");
}

/// 23834568 -> "23,834,568".
std::string grouped(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

/// 5713000000 -> "5.713 G" (decimal prefixes, for operation counts).
std::string scaled(int64_t v) {
  static const char *const kPrefix[] = {"", " K", " M", " G", " T", " P"};
  double d = (double)v;
  unsigned i = 0;
  while (std::abs(d) >= 1000 && i + 1 < std::size(kPrefix)) {
    d /= 1000;
    ++i;
  }
  if (i == 0)
    return std::to_string(v);
  return llvm::formatv("{0:f3}{1}", d, kPrefix[i]).str();
}

double share(int64_t part, int64_t whole) {
  return whole ? (double)part / (double)whole : 0.0;
}

} // namespace

int64_t peakLiveBytes(const Graph &g, int64_t batch) {
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  llvm::DenseMap<const Value *, size_t> lastUse;
  size_t index = 0;
  for (const Node *n : g.nodes()) {
    for (const Value *v : n->operands())
      lastUse[v] = index;
    ++index;
  }
  for (const Value *v : g.outputs())
    lastUse[v] = kNever;

  auto counted = [](const Value *v) { return v->producer()->op() != Op::Variable; };
  int64_t live = 0, peak = 0;
  index = 0;
  for (const Node *n : g.nodes()) {
    for (const auto &r : n->results())
      if (counted(r.get()))
        live += r->type().bytes(batch);
    peak = std::max(peak, live);
    for (const auto &r : n->results())
      if (counted(r.get()) && !lastUse.count(r.get()))
        live -= r->type().bytes(batch);
    for (const Value *v : n->operands()) {
      auto it = lastUse.find(v);
      // Erasing the entry frees a value read twice by one node only once.
      if (it != lastUse.end() && it->second == index) {
        if (counted(v))
          live -= v->type().bytes(batch);
        lastUse.erase(it);
      }
    }
    ++index;
  }
  return peak;
}

llvm::Error checkBatchFits(const Module &m, int64_t batch) {
  if (batch <= 0 || m.batch())
    return llvm::Error::success();
  for (const Graph *g : m.graphs())
    for (const Node *n : g->nodes())
      for (unsigned i = 0; i < n->numResults(); ++i)
        if (auto e = checkTensorSize(n->result(i)->type().bound(batch),
                                     "at batch " + llvm::Twine(batch) + ", '" +
                                         printable(n->result(i)->name()) + "'"))
          return e;
  return llvm::Error::success();
}

ModelSummary summarize(const Module &m, int64_t batch) {
  ModelSummary s;
  s.name = m.name();
  s.batchBound = m.batch().has_value();
  // A bound module's shapes are static: its own batch is the only one it has.
  s.batch = m.batch() ? *m.batch() : batch > 0 ? batch : 1;

  for (const Variable &v : m.variables()) {
    VariableStats &st = statsFor(s, v.kind);
    ++st.variables;
    st.elements += v.type.numElements();
    st.bytes += v.type.bytes();
  }

  llvm::DenseMap<unsigned, size_t> opRow;
  for (const Graph *g : m.graphs()) {
    for (const Node *n : g->nodes()) {
      ++s.nodes;
      NodeCost c = nodeCost(*n, s.batch);
      s.total += c;
      auto [it, inserted] = opRow.try_emplace((unsigned)n->op(), s.ops.size());
      if (inserted)
        s.ops.push_back(OpSummary{n->op(), 0, {}});
      OpSummary &row = s.ops[it->second];
      ++row.count;
      row.cost += c;
      if (n->op() != Op::Variable)
        for (const auto &r : n->results())
          s.activationBytes += r->type().bytes(s.batch);
    }
    s.peakLiveBytes = std::max(s.peakLiveBytes, peakLiveBytes(*g, s.batch));
    s.longestSum = std::max(s.longestSum, longestSum(*g, s.batch));
  }

  llvm::sort(s.ops, [](const OpSummary &a, const OpSummary &b) {
    if (a.cost.macs != b.cost.macs)
      return a.cost.macs > b.cost.macs;
    if (a.cost.flops != b.cost.flops)
      return a.cost.flops > b.cost.flops;
    if (a.count != b.count)
      return a.count > b.count;
    return opName(a.op) < opName(b.op);
  });
  return s;
}

void printSummary(const Module &m, int64_t batch, llvm::raw_ostream &os) {
  ModelSummary s = summarize(m, batch);
  os << "model " << s.name << ", batch " << s.batch
     << (s.batchBound ? " (bound)"
                      : " (the symbolic batch N counted as " + std::to_string(s.batch) + ")")
     << "\n";
  auto line = [&](llvm::StringRef label, const std::string &value, const std::string &note) {
    os << "  " << llvm::left_justify(label, 18) << llvm::right_justify(value, 16);
    if (!note.empty())
      os << "  " << note;
    os << "\n";
  };
  auto vars = [&](llvm::StringRef label, const VariableStats &v) {
    line(label, grouped(v.elements),
         bytesText(v.bytes) + " in " + std::to_string(v.variables) + " variables");
  };
  line("nodes", grouped(s.nodes), "");
  vars("parameters", s.params);
  vars("state", s.state);
  vars("optimizer slots", s.slots);
  line("MACs", scaled(s.total.macs), grouped(s.total.macs));
  line("FLOPs", scaled(s.total.flops), grouped(s.total.flops));
  line("bytes read", bytesText(s.total.bytesRead), "");
  line("bytes written", bytesText(s.total.bytesWritten), "");
  line("activations", bytesText(s.activationBytes), "every result, one buffer each");
  line("peak live", bytesText(s.peakLiveBytes), "in graph order, freed after last use");
  line("longest sum", grouped(s.longestSum),
       llvm::formatv("terms in a training step; float32 K·u = {0:e1}: runs that group it "
                     "otherwise (devices, workers, CPUs) may differ by this much relative",
                     std::ldexp((double)s.longestSum, -24))
           .str());

  os << "\n  " << llvm::left_justify("op", 24) << llvm::right_justify("count", 7)
     << llvm::right_justify("MACs", 14) << llvm::right_justify("share", 9)
     << llvm::right_justify("FLOPs", 14) << llvm::right_justify("share", 9)
     << llvm::right_justify("bytes", 14) << "\n";
  for (const OpSummary &row : s.ops) {
    os << "  " << llvm::left_justify(opName(row.op), 24)
       << llvm::format("%7lld", (long long)row.count)
       << llvm::right_justify(scaled(row.cost.macs), 14)
       << llvm::format("%8.2f%%", 100 * share(row.cost.macs, s.total.macs))
       << llvm::right_justify(scaled(row.cost.flops), 14)
       << llvm::format("%8.2f%%", 100 * share(row.cost.flops, s.total.flops))
       << llvm::right_justify(bytesText(row.cost.bytesRead + row.cost.bytesWritten), 14) << "\n";
  }
}

void printSummaryJson(const Module &m, int64_t batch, llvm::raw_ostream &os) {
  ModelSummary s = summarize(m, batch);
  llvm::json::OStream j(os, 2);
  auto vars = [&](llvm::StringRef key, const VariableStats &v) {
    j.attributeObject(key, [&] {
      j.attribute("variables", v.variables);
      j.attribute("elements", v.elements);
      j.attribute("bytes", v.bytes);
    });
  };
  j.object([&] {
    j.attribute("model", s.name);
    j.attribute("batch", s.batch);
    j.attribute("batch_bound", s.batchBound);
    j.attribute("nodes", s.nodes);
    vars("parameters", s.params);
    vars("state", s.state);
    vars("slots", s.slots);
    j.attribute("macs", s.total.macs);
    j.attribute("flops", s.total.flops);
    j.attribute("bytes_read", s.total.bytesRead);
    j.attribute("bytes_written", s.total.bytesWritten);
    j.attribute("activation_bytes", s.activationBytes);
    j.attribute("peak_live_bytes", s.peakLiveBytes);
    j.attribute("longest_sum", s.longestSum);
    j.attributeArray("ops", [&] {
      for (const OpSummary &row : s.ops)
        j.object([&] {
          j.attribute("op", opName(row.op));
          j.attribute("count", row.count);
          j.attribute("macs", row.cost.macs);
          j.attribute("mac_share", share(row.cost.macs, s.total.macs));
          j.attribute("flops", row.cost.flops);
          j.attribute("flop_share", share(row.cost.flops, s.total.flops));
          j.attribute("bytes_read", row.cost.bytesRead);
          j.attribute("bytes_written", row.cost.bytesWritten);
        });
    });
  });
  os << "\n";
}

} // namespace graphc
