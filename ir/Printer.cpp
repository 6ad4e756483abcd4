#include "ir/Printer.h"

#include "ir/AttributeText.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {

static bool isIdentChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '.' || c == '/' || c == ':' || c == '-';
}

static void printIdent(llvm::StringRef s, llvm::raw_ostream &os) {
  if (!s.empty() && llvm::all_of(s, isIdentChar))
    os << s;
  else
    printString(s, os);
}

static void printValueRef(const Value *v, llvm::raw_ostream &os) {
  os << '%';
  printIdent(v->name(), os);
}

static void printInitializer(const Variable &v, const PrintOptions &opts, llvm::raw_ostream &os) {
  if (!v.data.empty()) {
    if (opts.weights) {
      os << "data ";
      printHex(v.data.raw(), v.data.bytes(), os);
    } else {
      os << "elided";
    }
    return;
  }
  os << v.init.fn;
  if (!v.init.args.empty()) {
    os << '(';
    llvm::interleave(
        v.init.args, os, [&](double d) { os << formatDouble(d); }, ", ");
    os << ')';
  }
}

/// The node name the parser derives when none is printed.
static std::string defaultNodeName(const Node &n) {
  if (n.numResults() == 1)
    return n.result()->name();
  if (n.numResults() == 0)
    return "";
  llvm::StringRef first = n.result(0)->name();
  if (!first.endswith(":0"))
    return "";
  std::string base = first.drop_back(2).str();
  for (unsigned i = 0; i < n.numResults(); ++i)
    if (n.result(i)->name() != base + ":" + std::to_string(i))
      return "";
  return base;
}

static void printNode(const Node &n, llvm::raw_ostream &os) {
  if (n.numResults()) {
    llvm::interleave(
        n.results(), os, [&](const std::unique_ptr<Value> &v) { printValueRef(v.get(), os); },
        ", ");
    os << " = ";
  }
  os << opName(n.op());
  if (n.numOperands()) {
    os << '(';
    llvm::interleave(
        n.operands(), os, [&](const Value *v) { printValueRef(v, os); }, ", ");
    os << ')';
  }
  if (!n.attrs().empty()) {
    os << " {";
    llvm::interleave(
        n.attrs().entries(), os,
        [&](const Attrs::Entry &e) {
          printIdent(e.first, os);
          os << " = ";
          printAttribute(e.second, os);
        },
        ", ");
    os << '}';
  }
  if (n.numResults()) {
    os << " : ";
    llvm::interleave(
        n.results(), os, [&](const std::unique_ptr<Value> &v) { os << toString(v->type()); }, ", ");
  }
  if (n.name() != defaultNodeName(n)) {
    os << " name ";
    printString(n.name(), os);
  }
  if (n.tower() >= 0)
    os << " tower " << n.tower();
  auto clause = [&](llvm::StringRef key, const std::string &v) {
    if (v.empty())
      return;
    os << ' ' << key << ' ';
    printString(v, os);
  };
  auto deviceClause = [&](llvm::StringRef key, std::optional<DeviceId> d) {
    if (d)
      clause(key, d->str());
  };
  deviceClause("requested", n.requestedDevice());
  deviceClause("device", n.assignedDevice());
  clause("reason", n.placementReason());
}

std::string toText(const Node &n) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printNode(n, os);
  return os.str();
}

void print(const Module &m, llvm::raw_ostream &os, PrintOptions opts) {
  os << "module ";
  printIdent(m.name(), os);
  os << " {\n";
  if (Attrs meta = m.plan().toAttrs(); !meta.empty()) {
    os << "  meta ";
    llvm::interleave(
        meta.entries(), os,
        [&](const Attrs::Entry &e) {
          printIdent(e.first, os);
          os << " = ";
          printAttribute(e.second, os);
        },
        ", ");
    os << '\n';
  }
  for (const Variable &v : m.variables()) {
    os << "  var ";
    printIdent(v.name, os);
    os << " : " << toString(v.type) << ' ' << varKindName(v.kind) << ' ';
    printInitializer(v, opts, os);
    if (!v.devices.empty()) {
      os << " @ ";
      llvm::interleave(
          v.devices, os, [&](DeviceId d) { printString(d.str(), os); }, ", ");
      if (v.sharded)
        os << " sharded";
    }
    os << '\n';
  }
  for (const Graph *g : m.graphs()) {
    os << "  graph ";
    printIdent(g->name(), os);
    os << " {\n";
    for (const Node *n : g->nodes()) {
      os << "    ";
      printNode(*n, os);
      os << '\n';
    }
    os << "    return";
    llvm::interleave(
        g->outputs(), os,
        [&](const Value *v) {
          os << ' ';
          printValueRef(v, os);
        },
        ",");
    os << "\n  }\n";
  }
  os << "}\n";
}

std::string toText(const Module &m, PrintOptions opts) {
  std::string s;
  // A few hundred bytes a node; buffered, so that the many small writes do
  // not each grow the string.
  size_t nodes = 0;
  for (const Graph *g : m.graphs())
    nodes += g->numNodes();
  s.reserve(256 * (nodes + m.variables().size()) + 4096);
  llvm::raw_string_ostream os(s);
  os.SetBuffered();
  print(m, os, opts);
  os.flush();
  return s;
}

} // namespace graphc
