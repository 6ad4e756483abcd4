//===- HtmlView.cpp - Graph data as JSON plus the inline page ---------------===//
//
// Nodes and clusters are arrays, not objects, to keep 20k-node pages a few
// megabytes; view.js names the fields. The page text comes from
// placement/html/view.{js,css}, embedded at build time (HtmlViewAssets.inc).
//
//===----------------------------------------------------------------------===//

#include "placement/HtmlView.h"

#include "placement/ViewTree.h"

#include "ir/AttributeText.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <map>

namespace graphc {
namespace {

#include "HtmlViewAssets.inc"

/// Attributes in one line; tensors by type only.
std::string attributesText(const Node &n) {
  std::string s;
  llvm::raw_string_ostream os(s);
  bool first = true;
  for (const auto &[name, value] : n.attrs().entries()) {
    os << (first ? "" : ", ") << name << " = ";
    first = false;
    if (const Tensor *t = std::get_if<Tensor>(&value))
      os << "tensor " << toString(t->type());
    else
      printAttribute(value, os);
  }
  return os.str();
}

/// Meta entries the panel shows as tables and sentences of their own.
bool shownApart(llvm::StringRef name) {
  return name == "cluster" || name == "params_auto" || name == "params_why" ||
         name == "split_speeds";
}

std::string metaText(const Module &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  bool first = true;
  const Attrs meta = m.plan().toAttrs();
  for (const auto &[name, value] : meta.entries()) {
    if (shownApart(name))
      continue;
    os << (first ? "" : ", ") << name << " = ";
    first = false;
    printAttribute(value, os);
  }
  return os.str();
}

/// The cluster the plan was placed for, as its file spells it (devices with
/// kind, memory and speed; links with bandwidth); null without one.
llvm::json::Value clusterData(const Module &m) {
  if (!m.plan().cluster)
    return nullptr;
  auto cluster = llvm::json::parse(clusterToJson(*m.plan().cluster));
  if (!cluster) {
    llvm::consumeError(cluster.takeError());
    return nullptr;
  }
  return std::move(*cluster);
}

/// What the placer decided, as [label, sentence] pairs: the parameter mode
/// (and why, under --params auto) and the towers' shares of the batch.
llvm::json::Array decisionsData(const Module &m) {
  llvm::json::Array out;
  const PlanInfo &plan = m.plan();
  if (plan.params) {
    std::string params = modeName(*plan.params);
    std::string why = plan.paramsWhy.value_or("");
    out.push_back(
        llvm::json::Array{"params", why.empty() ? params + " (--params " + params + ")" : why});
  }
  Ints batches = plan.towerBatches.value_or(Ints{});
  if (batches.size() > 1) {
    std::string text;
    for (int64_t b : batches)
      text += (text.empty() ? "" : ", ") + std::to_string(b);
    text += plan.split ? " (--split " + modeName(*plan.split) + ")" : " (even)";
    out.push_back(llvm::json::Array{"tower batches", text});
  }
  return out;
}

llvm::json::Object graphData(const Graph &g, const std::map<DeviceId, unsigned> &deviceIndex) {
  ViewTree tree = ViewTree::build(g);
  int64_t batch = g.module().batch().value_or(1);
  llvm::json::Array clusters, nodes;
  for (const ViewCluster &c : tree.clusters())
    clusters.push_back(
        llvm::json::Array{c.label, c.parent, c.isTower ? 1 : 0, (int64_t)c.totalNodes});
  llvm::DenseMap<const Node *, unsigned> index;
  for (const Node *n : g.nodes())
    index[n] = index.size();
  for (const Node *n : g.nodes()) {
    llvm::json::Array outs, operands;
    for (const auto &r : n->results())
      outs.push_back(llvm::json::Array{toString(r->type()), r->type().bytes(batch)});
    for (const Value *v : n->operands()) {
      operands.push_back(index.lookup(v->producer()));
      operands.push_back(v->resultIndex());
    }
    std::optional<DeviceId> assigned = n->assignedDevice();
    nodes.push_back(llvm::json::Array{n->name(), opName(n->op()), tree.clusterOf(n),
                                      assigned ? (int)deviceIndex.at(*assigned) : -1,
                                      deviceText(n->requestedDevice()), n->placementReason(),
                                      n->tower(), std::move(outs), attributesText(*n),
                                      std::move(operands)});
  }
  return llvm::json::Object{
      {"name", g.name()}, {"clusters", std::move(clusters)}, {"nodes", std::move(nodes)}};
}

/// JSON inside <script>: '<' only occurs in strings, where \u003c means the same.
std::string scriptSafe(const std::string &json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json)
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  return out;
}

std::string htmlEscape(llvm::StringRef s) {
  std::string out;
  for (char c : s)
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  return out;
}

} // namespace

std::string htmlViewData(const Module &m, const RunMetrics *metrics, const RunTrace *trace) {
  std::vector<DeviceId> devices = devicesOf(m);
  std::map<DeviceId, unsigned> deviceIndex;
  llvm::json::Array deviceList, graphs;
  for (DeviceId d : devices) {
    deviceIndex.try_emplace(d, deviceIndex.size());
    deviceList.push_back(llvm::json::Array{d.str(), deviceColor(d)});
  }
  for (const Graph *g : m.graphs())
    graphs.push_back(graphData(*g, deviceIndex));
  llvm::json::Object root{{"module", m.name()},
                          {"meta", metaText(m)},
                          {"cluster", clusterData(m)},
                          {"decisions", decisionsData(m)},
                          {"devices", std::move(deviceList)},
                          {"graphs", std::move(graphs)}};
  if (metrics || trace)
    root["run"] = runViewData(metrics, trace);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::json::Value(std::move(root));
  return os.str();
}

void writeHtmlView(const Module &m, llvm::raw_ostream &os, const RunMetrics *metrics,
                   const RunTrace *trace) {
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
     << "<title>graphc view: " << htmlEscape(m.name()) << "</title>\n<style>\n"
     << kViewCss << "</style>\n</head>\n<body>\n"
     << "<div id=\"bar\"><h1 id=\"title\"></h1><select id=\"graph\"></select>"
     << "<input id=\"search\" type=\"search\" placeholder=\"find a node by name  ( / )\">"
     << "<button id=\"fit\" title=\"fit the graph to the window (f)\">Fit</button>"
     << "<button id=\"expand-level\">Expand one level</button>"
     << "<button id=\"collapse\">Collapse all</button><div id=\"legend\"></div></div>\n"
     << "<div id=\"matches\"></div>\n<div id=\"canvas\"></div>\n<div id=\"run\"></div>\n"
     << "<div id=\"panel\"></div>\n"
     << "<div id=\"status\"></div>\n"
     << "<script id=\"graph-data\" type=\"application/json\">"
     << scriptSafe(htmlViewData(m, metrics, trace)) << "</script>\n<script>\n"
     << kViewJs << "</script>\n</body>\n</html>\n";
}

} // namespace graphc
