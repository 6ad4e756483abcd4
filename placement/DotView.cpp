//===- DotView.cpp - Nested clusters, device colours, crossing edges --------===//

#include "placement/DotView.h"

#include "placement/ViewTree.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/OutputFile.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"

namespace graphc {
namespace {

/// A DOT double-quoted string.
std::string quote(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string typesOf(const Node &n) {
  std::vector<std::string> ts;
  for (const auto &r : n.results())
    ts.push_back(toString(r->type()));
  return llvm::join(ts, ", ");
}

std::string tooltip(const Node &n) {
  std::string s = n.name() + "\nop: " + opName(n.op()).str();
  if (n.numResults())
    s += "\nout: " + typesOf(n);
  for (const Value *v : n.operands())
    s += "\nin: " + v->name() + " " + toString(v->type());
  if (n.tower() >= 0)
    s += "\ntower: " + std::to_string(n.tower());
  auto orDash = [](std::optional<DeviceId> d) { return d ? d->str() : std::string("-"); };
  s += "\nrequested: " + orDash(n.requestedDevice());
  s += "\nassigned: " + orDash(n.assignedDevice());
  if (!n.placementReason().empty())
    s += "\nreason: " + n.placementReason();
  return s;
}

class DotWriter {
public:
  DotWriter(llvm::raw_ostream &os) : os_(os) {}

  void graph(const Graph &g, unsigned gi) {
    prefix_ = "g";
    prefix_.append(std::to_string(gi));
    prefix_.push_back('n');
    for (const Node *n : g.nodes())
      id_[n] = id_.size();
    ViewTree tree = ViewTree::build(g);
    for (unsigned c : tree.rootClusters())
      cluster(tree, c, 1);
    for (const Node *n : tree.rootNodes())
      node(*n, 1);
    edges(g);
  }

  void legend(llvm::ArrayRef<DeviceId> devices) {
    if (devices.empty())
      return;
    os_ << "  subgraph cluster_legend {\n    label=\"devices\"; style=\"rounded,dashed\"; "
           "color=\"#999999\";\n";
    for (unsigned i = 0; i < devices.size(); ++i)
      os_ << "    legend" << i << " [label=" << quote(devices[i].str())
          << ", fillcolor=" << quote(deviceColor(devices[i])) << "];\n";
    for (unsigned i = 1; i < devices.size(); ++i)
      os_ << "    legend" << i - 1 << " -> legend" << i << " [style=invis];\n";
    os_ << "  }\n";
  }

private:
  void indent(unsigned depth) { os_.indent(2 * depth); }

  void cluster(const ViewTree &t, unsigned c, unsigned depth) {
    const ViewCluster &vc = t.clusters()[c];
    indent(depth);
    os_ << "subgraph cluster_" << prefix_ << "c" << c << " {\n";
    indent(depth + 1);
    os_ << "label=" << quote(vc.label + "  (" + std::to_string(vc.totalNodes) + ")") << "; ";
    if (vc.isTower)
      os_ << "style=\"rounded,filled\"; fillcolor=\"#f3f3f7\"; color=\"#55557a\"; penwidth=1.6;\n";
    else
      os_ << "style=\"rounded,dashed\"; color=\"#9a9a9a\";\n";
    for (unsigned k : vc.children)
      cluster(t, k, depth + 1);
    for (const Node *n : vc.nodes)
      node(*n, depth + 1);
    indent(depth);
    os_ << "}\n";
  }

  void node(const Node &n, unsigned depth) {
    llvm::StringRef leaf = llvm::StringRef(n.name()).rsplit('/').second;
    if (leaf.empty())
      leaf = n.name();
    std::string label = leaf.str();
    if (leaf != opName(n.op())) {
      label.push_back('\n');
      label.append(opName(n.op()).str());
    }
    indent(depth);
    os_ << prefix_ << id_[&n] << " [label=" << quote(label)
        << ", fillcolor=" << quote(deviceColor(n.assignedDevice()))
        << ", tooltip=" << quote(tooltip(n)) << "];\n";
  }

  void edges(const Graph &g) {
    llvm::DenseSet<std::pair<const Node *, const Node *>> seen;
    for (const Node *n : g.nodes())
      for (const Value *v : n->operands()) {
        const Node *p = v->producer();
        if (!seen.insert({p, n}).second)
          continue;
        os_ << "  " << prefix_ << id_[p] << " -> " << prefix_ << id_[n];
        if (p->assignedDevice() != n->assignedDevice())
          os_ << " [color=" << quote(kCrossingEdgeColor) << ", penwidth=2.4, tooltip="
              << quote(v->name() + ": " + deviceText(p->assignedDevice()) + " -> " +
                       deviceText(n->assignedDevice()) + ", " +
                       std::to_string(v->type().bytes(g.module().batch().value_or(1))) + " bytes")
              << "]";
        os_ << ";\n";
      }
  }

  llvm::raw_ostream &os_;
  std::string prefix_;
  llvm::DenseMap<const Node *, unsigned> id_;
};

} // namespace

void writeDot(const Module &m, llvm::raw_ostream &os) {
  os << "digraph " << quote(m.name()) << " {\n"
     << "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, newrank=true];\n"
     << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=9, "
        "penwidth=0.6];\n"
     << "  edge [color=\"#8a8a8a\", arrowsize=0.6];\n";
  std::vector<DeviceId> devices = devicesOf(m);
  DotWriter w(os);
  w.legend(devices);
  std::vector<Graph *> graphs = m.graphs();
  for (unsigned gi = 0; gi < graphs.size(); ++gi) {
    bool wrap = graphs.size() > 1;
    if (wrap)
      os << "  subgraph cluster_graph" << gi
         << " {\n  label=" << quote("graph " + graphs[gi]->name()) << ";\n";
    w.graph(*graphs[gi], gi);
    if (wrap)
      os << "  }\n";
  }
  os << "}\n";
}

std::string toDot(const Module &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  writeDot(m, os);
  return os.str();
}

llvm::Expected<std::string> renderSvg(llvm::StringRef dot, unsigned timeoutSeconds) {
  auto program = llvm::sys::findProgramByName("dot");
  if (!program)
    return makeError("cannot render SVG: Graphviz's 'dot' is not on PATH (Debian package "
                     "graphviz); write .dot instead, or use the HTML view (graphc view), which "
                     "needs nothing installed");
  llvm::SmallString<128> in, out, err;
  for (auto [path, ext] : {std::pair{&in, "dot"}, {&out, "svg"}, {&err, "txt"}})
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile("graphc-view", ext, *path))
      return makeError("cannot create a temporary file: " + ec.message());
  auto cleanup = llvm::make_scope_exit([&] {
    for (auto *path : {&in, &out, &err})
      if (!path->empty())
        llvm::sys::fs::remove(*path);
  });
  if (auto e = writeOutputFile(in, dot))
    return e;
  std::string message;
  llvm::SmallVector<llvm::StringRef, 6> args{*program, "-Tsvg", in, "-o", out};
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::None, llvm::StringRef(err)};
  int rc =
      llvm::sys::ExecuteAndWait(*program, args, llvm::None, redirects, timeoutSeconds, 0, &message);
  // LLVM kills a child that outlives its timeout and says so.
  if (rc == -2 && timeoutSeconds > 0 && llvm::StringRef(message).contains("timed out"))
    return llvm::createStringError(std::make_error_code(std::errc::timed_out),
                                   "Graphviz 'dot' did not finish in %u s", timeoutSeconds);
  if (rc != 0) {
    auto stderrText = readInputFile(err);
    std::string detail = message;
    if (stderrText)
      detail = (*stderrText)->getBuffer().trim().str();
    else
      llvm::consumeError(stderrText.takeError());
    return makeError("Graphviz 'dot' failed (exit " + llvm::Twine(rc) + ")" +
                     (detail.empty() ? "" : ": " + detail));
  }
  auto buffer = readInputFile(out, "the SVG of 'dot'");
  if (!buffer)
    return buffer.takeError();
  return (*buffer)->getBuffer().str();
}

llvm::Expected<std::string> svgOf(const Module &m) {
  size_t nodes = 0;
  for (const Graph *g : m.graphs())
    nodes += g->numNodes();
  if (nodes > kSvgMaxNodes)
    return makeError("the graph has " + llvm::Twine(nodes) +
                     " nodes, more than Graphviz lays out in reasonable time (" +
                     llvm::Twine(kSvgMaxNodes) +
                     " at most here); write .html for the interactive view, which takes any "
                     "size, or .dot to run Graphviz yourself");
  auto svg = renderSvg(toDot(m), kSvgTimeoutSeconds);
  if (svg)
    return svg;
  return llvm::handleErrors(svg.takeError(), [&](std::unique_ptr<llvm::StringError> e) {
    if (e->convertToErrorCode() != std::errc::timed_out)
      return llvm::Error(std::move(e));
    return makeError("Graphviz did not lay out the graph's " + llvm::Twine(nodes) + " nodes in " +
                     llvm::Twine(kSvgTimeoutSeconds) +
                     " s; write .html for the interactive view, or .dot to run Graphviz yourself");
  });
}

} // namespace graphc
