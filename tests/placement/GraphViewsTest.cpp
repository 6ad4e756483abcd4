//===- GraphViewsTest.cpp - View tree, DOT structure, SVG, HTML data -------===//

#include "PlacementTestUtil.h"

#include "passes/InsertTransfers.h"
#include "passes/Pass.h"
#include "placement/DotView.h"
#include "placement/HtmlView.h"
#include "placement/Placer.h"
#include "placement/ViewTree.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

using namespace graphc;
using namespace graphc::testing;

namespace {

std::unique_ptr<Module> placedTowers(int towers = 2) {
  TowerGraphOptions o;
  o.towers = towers;
  o.batch = 4 * towers;
  auto m = buildTowerGraph(o);
  Cluster c = Cluster::defaultCluster(towers);
  EXPECT_EQ(errorText(Placer(c, anyKernelAnywhere).run(*m)), "");
  auto changed = insertTransfers(*m);
  EXPECT_TRUE(bool(changed));
  return m;
}

/// What a DOT text nests: cluster label -> parent cluster label, node id ->
/// innermost cluster label ("" at the top level), node id -> fill colour.
struct DotShape {
  std::map<std::string, std::string> clusterParent, nodeCluster, nodeFill;
  std::vector<std::string> edgeLines;
};

std::string attr(llvm::StringRef line, llvm::StringRef key) {
  size_t at = line.find(key.str() + "=\"");
  if (at == llvm::StringRef::npos)
    return "";
  auto [value, rest] = line.substr(at + key.size() + 2).split('"');
  return value.str();
}

DotShape parseDot(llvm::StringRef dot) {
  DotShape s;
  std::vector<std::string> stack;
  llvm::SmallVector<llvm::StringRef, 64> lines;
  dot.split(lines, '\n');
  bool pendingLabel = false;
  for (llvm::StringRef raw : lines) {
    llvm::StringRef l = raw.trim();
    if (l.startswith("subgraph cluster_")) {
      stack.push_back("?");
      pendingLabel = true;
    } else if (pendingLabel && l.startswith("label=")) {
      std::string label = attr(l, "label");
      label = label.substr(0, label.find("  ("));
      stack.back() = label;
      s.clusterParent[label] = stack.size() > 1 ? stack[stack.size() - 2] : "";
      pendingLabel = false;
    } else if (l == "}") {
      if (!stack.empty())
        stack.pop_back();
    } else if (l.contains(" -> ")) {
      s.edgeLines.push_back(l.str());
    } else if (l.startswith("g0n")) {
      std::string id = l.substr(0, l.find(' ')).str();
      s.nodeCluster[id] = stack.empty() ? "" : stack.back();
      s.nodeFill[id] = attr(l, "fillcolor");
    }
  }
  return s;
}

std::string nodeId(const Module &m, llvm::StringRef name) {
  unsigned i = 0;
  for (const Node *n : m.findGraph("main")->nodes()) {
    if (n->name() == name)
      return "g0n" + std::to_string(i);
    ++i;
  }
  return "?";
}

} // namespace

TEST(ViewTree, TowersAtTheTopScopesInsideSingletonsDissolved) {
  auto m = placedTowers();
  ViewTree t = ViewTree::build(m->main());
  std::map<std::string, std::string> parentOf;
  for (const ViewCluster &c : t.clusters())
    parentOf[c.label] = c.parent < 0 ? "" : t.clusters()[c.parent].label;
  // "tower_1/dense/MatMul" sits in tower 1 > dense: the tower_1 scope is the tower.
  const Node *mm = m->main().findNode("tower_1/dense/MatMul");
  ASSERT_GE(t.clusterOf(mm), 0);
  const ViewCluster &dense = t.clusters()[t.clusterOf(mm)];
  EXPECT_EQ(dense.label, "dense");
  ASSERT_GE(dense.parent, 0);
  EXPECT_EQ(t.clusters()[dense.parent].label, "tower 1");
  EXPECT_TRUE(t.clusters()[dense.parent].isTower);
  EXPECT_EQ(parentOf.count("tower_1"), 0u);
  EXPECT_EQ(t.clusters()[t.clusterOf(m->main().findNode("tower_1/grad/w/to_cpu_0"))].label, "grad");
  // The loss scope holds one node: dissolved into the tower.
  EXPECT_EQ(parentOf.count("loss"), 0u);
  const Node *loss = m->main().findNode("tower_1/loss/ReduceMean");
  EXPECT_EQ(t.clusters()[t.clusterOf(loss)].label, "tower 1");
  // Top level: the split, the variable read, the update.
  EXPECT_EQ(t.clusterOf(m->main().findNode("split")), -1);
  EXPECT_EQ(t.clusters()[t.rootClusters()[0]].label, "tower 0");
  size_t total = t.rootNodes().size();
  for (unsigned c : t.rootClusters())
    total += t.clusters()[c].totalNodes;
  EXPECT_EQ(total, m->main().numNodes());
}

TEST(ViewTree, ChainsOfScopesMerge) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {2}));
  {
    Builder::Scope a(b, "Mixed_5b");
    Builder::Scope br(b, "branch1x1");
    x = b.create(Op::Relu, {x}, {}, "relu");
    x = b.create(Op::Relu, {x}, {}, "relu2");
  }
  ViewTree t = ViewTree::build(m.main());
  ASSERT_EQ(t.clusters().size(), 1u);
  EXPECT_EQ(t.clusters()[0].label, "Mixed_5b/branch1x1");
  EXPECT_EQ(t.clusters()[0].nodes.size(), 2u);
}

TEST(ViewTree, AWeightSitsInTheBoxOfTheLayerThatUsesIt) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 4}));
  Value *w = b.newVariable(makeVar("block.fc.weight", {4, 3}, VarKind::Param));
  {
    Builder::Scope block(b, "block");
    x = b.create(Op::MatMul, {x, w}, {}, "fc");
    x = b.create(Op::Relu, {x}, {}, "relu");
  }
  ViewTree t = ViewTree::build(m.main());
  const Node *fc = m.main().findNode("block/fc");
  const Node *read = m.main().findNode("block.fc.weight");
  ASSERT_GE(t.clusterOf(fc), 0);
  EXPECT_EQ(t.clusterOf(fc), t.clusterOf(read));
  const ViewCluster &box = t.clusters()[t.clusterOf(fc)];
  EXPECT_EQ(box.label, "fc");
  EXPECT_EQ(box.nodes, (std::vector<const Node *>{read, fc}));
  ASSERT_GE(box.parent, 0);
  EXPECT_EQ(t.clusters()[box.parent].label, "block");
  EXPECT_EQ(t.clusterOf(m.main().findNode("block/relu")), box.parent);
}

TEST(ViewTree, DeviceColoursAreDistinctAndStable) {
  std::set<std::string> colours;
  colours.insert(deviceColor(DeviceId::host()));
  colours.insert(deviceColor(DeviceId::cpu(1)));
  for (unsigned k = 0; k < 8; ++k)
    colours.insert(deviceColor(DeviceId::gpu(k)));
  EXPECT_EQ(colours.size(), 10u);
  EXPECT_EQ(deviceColor(DeviceId::gpu(3)), deviceColor(DeviceId::gpu(3)));
  EXPECT_EQ(deviceColor(std::nullopt), "#ffffff");
  EXPECT_EQ(deviceColor(DeviceId::host()), "#d4d4d4");
}

TEST(DotView, ClustersPerTowerAndScopeColoursAndCrossingEdges) {
  auto m = placedTowers();
  std::string dot = toDot(*m);
  DotShape s = parseDot(dot);
  EXPECT_EQ(s.clusterParent["tower 0"], "");
  EXPECT_EQ(s.clusterParent["tower 1"], "");
  EXPECT_EQ(s.clusterParent["dense"], "tower 1"); // both towers have one; the last one is kept
  EXPECT_EQ(s.clusterParent["devices"], "");

  EXPECT_EQ(s.nodeCluster[nodeId(*m, "tower_0/dense/MatMul")], "dense");
  // A tower's result copied to the host is drawn in its tower.
  EXPECT_EQ(s.nodeCluster[nodeId(*m, "tower_0/dense/MatMul/to_cpu_0")], "dense");
  EXPECT_EQ(s.nodeFill[nodeId(*m, "tower_0/dense/MatMul/to_cpu_0")], deviceColor(DeviceId::host()));
  EXPECT_EQ(s.nodeCluster[nodeId(*m, "tower_0/loss/ReduceMean")], "tower 0");
  EXPECT_EQ(s.nodeCluster[nodeId(*m, "split")], "");
  EXPECT_EQ(s.nodeFill[nodeId(*m, "tower_1/dense/Relu")], deviceColor(DeviceId::gpu(1)));
  EXPECT_EQ(s.nodeFill[nodeId(*m, "update/dense.weight")], deviceColor(DeviceId::host()));

  // Legend: one entry per device with its colour.
  for (DeviceId d : {DeviceId::host(), DeviceId::gpu(0), DeviceId::gpu(1)})
    EXPECT_NE(dot.find("[label=\"" + d.str() + "\", fillcolor=\"" + deviceColor(d) + "\"]"),
              std::string::npos)
        << d;

  // Red exactly on the edges whose ends are on different devices.
  std::set<std::pair<std::string, std::string>> crossing;
  unsigned i = 0;
  std::map<const Node *, std::string> ids;
  for (const Node *n : m->main().nodes())
    ids[n] = "g0n" + std::to_string(i++);
  for (const Node *n : m->main().nodes())
    for (const Value *v : n->operands())
      if (v->producer()->assignedDevice() != n->assignedDevice())
        crossing.insert({ids[v->producer()], ids[n]});
  EXPECT_FALSE(crossing.empty());
  unsigned red = 0;
  for (const std::string &e : s.edgeLines) {
    if (e.rfind("legend", 0) == 0)
      continue;
    llvm::StringRef l(e);
    auto [from, rest] = l.split(" -> ");
    std::string to = rest.substr(0, rest.find_first_of(" ;")).str();
    bool isRed = l.contains(kCrossingEdgeColor);
    red += isRed;
    EXPECT_EQ(isRed, crossing.count({from.str(), to}) == 1) << e;
  }
  EXPECT_EQ(red, crossing.size());
}

TEST(DotView, AGraphTooLargeForGraphvizIsRefusedInOneLine) {
  auto m = std::make_unique<Module>("chain");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 3}));
  for (size_t i = 0; i < kSvgMaxNodes; ++i)
    x = b.create(Op::Relu, {x}, {}, "relu" + std::to_string(i));
  m->main().addOutput(x);
  auto svg = svgOf(*m);
  ASSERT_FALSE(bool(svg));
  std::string e = llvm::toString(svg.takeError());
  EXPECT_NE(e.find("the graph has " + std::to_string(kSvgMaxNodes + 1) + " nodes"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("write .html"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(DotView, RendersSvgWithGraphvizOrSaysItIsMissing) {
  auto m = placedTowers();
  std::string dot = toDot(*m);
  if (!llvm::sys::findProgramByName("dot"))
    GTEST_SKIP() << "Graphviz 'dot' is not installed";
  auto svg = renderSvg(dot, 60);
  ASSERT_TRUE(bool(svg)) << llvm::toString(svg.takeError());
  EXPECT_NE(svg->find("<svg"), std::string::npos);
  EXPECT_NE(svg->find("tower 0"), std::string::npos);
  EXPECT_NE(svg->find(deviceColor(DeviceId::gpu(1))), std::string::npos);

  auto broken = renderSvg("digraph { a -> }", 60);
  ASSERT_FALSE(bool(broken));
  EXPECT_NE(llvm::toString(broken.takeError()).find("Graphviz 'dot' failed"), std::string::npos);

  std::string path = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", "/nonexistent", 1);
  auto missing = renderSvg(dot);
  setenv("PATH", path.c_str(), 1);
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("Graphviz's 'dot' is not on PATH"),
            std::string::npos);
}

TEST(DotView, AGraphvizThatRunsPastItsTimeIsStoppedAndSaysSo) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("graphc-slow-dot", dir));
  llvm::SmallString<128> fake(dir);
  llvm::sys::path::append(fake, "dot");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(fake, ec);
    ASSERT_FALSE(ec) << ec.message();
    os << "#!/bin/sh\nexec sleep 30\n";
  }
  using namespace llvm::sys::fs;
  ASSERT_FALSE(setPermissions(fake, all_read | all_exe | owner_write));
  std::string path = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", (dir + ":" + path).str().c_str(), 1);
  auto slow = renderSvg("digraph { a -> b }", 1);
  setenv("PATH", path.c_str(), 1);
  llvm::sys::fs::remove_directories(dir);
  ASSERT_FALSE(bool(slow));
  std::string message;
  std::error_code code;
  llvm::handleAllErrors(slow.takeError(), [&](const llvm::ErrorInfoBase &e) {
    message = e.message();
    code = e.convertToErrorCode();
  });
  EXPECT_EQ(code, std::errc::timed_out) << message;
  EXPECT_EQ(message, "Graphviz 'dot' did not finish in 1 s");
}

TEST(HtmlView, DataListsClustersNodesAndDevices) {
  auto m = placedTowers();
  auto data = llvm::json::parse(htmlViewData(*m));
  ASSERT_TRUE(bool(data)) << llvm::toString(data.takeError());
  const llvm::json::Object &o = *data->getAsObject();
  EXPECT_EQ(*o.getString("module"), "towers");
  const llvm::json::Array &devices = *o.getArray("devices");
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(*devices[1].getAsArray()->front().getAsString(), "gpu:0");
  const llvm::json::Object &g = *(*o.getArray("graphs"))[0].getAsObject();
  const llvm::json::Array &nodes = *g.getArray("nodes");
  ASSERT_EQ(nodes.size(), m->main().numNodes());
  unsigned i = 0;
  for (const Node *n : m->main().nodes()) {
    const llvm::json::Array &row = *nodes[i++].getAsArray();
    EXPECT_EQ(*row[0].getAsString(), n->name());
    EXPECT_EQ(*row[1].getAsString(), opName(n->op()));
    EXPECT_EQ(*row[5].getAsString(), n->placementReason());
    EXPECT_EQ(row[9].getAsArray()->size(), 2 * n->numOperands());
  }
  const llvm::json::Array &clusters = *g.getArray("clusters");
  EXPECT_EQ(*(*clusters[0].getAsArray())[0].getAsString(), "tower 0");
}

TEST(HtmlView, DataShowsTheClusterAndThePlacersDecisions) {
  auto m = placedTowers();
  EXPECT_EQ(llvm::json::parse(htmlViewData(*m))->getAsObject()->getArray("decisions")->size(), 0u);
  m->plan().cluster = Cluster::defaultCluster(2);
  m->plan().params = ParamPlacement{ParamPlacement::Cpu};
  m->plan().paramsWhy = std::string("--params auto chose cpu: predicted step 1.00 ms");
  m->plan().towerBatches = Ints{5, 3};
  m->plan().split = SplitSpec{SplitSpec::Weights, {5, 3}};
  auto data = llvm::json::parse(htmlViewData(*m));
  ASSERT_TRUE(bool(data)) << llvm::toString(data.takeError());
  const llvm::json::Object &o = *data->getAsObject();
  // The cluster as a structure (the page draws its tables), not escaped text in the meta line.
  const llvm::json::Array &devices = *o.getObject("cluster")->getArray("devices");
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(*devices[2].getAsObject()->getString("name"), "gpu:1");
  EXPECT_EQ(*devices[2].getAsObject()->getNumber("relative_speed"), 1.0);
  EXPECT_EQ(o.getObject("cluster")->getArray("links")->size(), 3u);
  std::string meta = o.getString("meta")->str();
  EXPECT_EQ(meta.find("devices"), std::string::npos) << meta;
  EXPECT_EQ(meta.find("params_why"), std::string::npos) << meta;
  const llvm::json::Array &decisions = *o.getArray("decisions");
  ASSERT_EQ(decisions.size(), 2u);
  EXPECT_EQ(*(*decisions[0].getAsArray())[1].getAsString(),
            "--params auto chose cpu: predicted step 1.00 ms");
  EXPECT_EQ(*(*decisions[1].getAsArray())[1].getAsString(), "5, 3 (--split 5,3)");
}

TEST(HtmlView, PageIsSelfContained) {
  auto m = placedTowers();
  m->main().findNode("split")->setPlacementReason("</script><b>not markup</b>");
  std::string page;
  llvm::raw_string_ostream os(page);
  writeHtmlView(*m, os);
  os.flush();
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  // The only URL is the SVG namespace, which is a name, not a fetch.
  size_t http = 0, at = 0;
  while ((at = page.find("http://", at)) != std::string::npos) {
    EXPECT_EQ(page.compare(at, 26, "http://www.w3.org/2000/svg"), 0);
    ++http;
    ++at;
  }
  EXPECT_LE(http, 2u);
  // Text from the graph cannot close the data script.
  EXPECT_EQ(page.find("</script><b>"), std::string::npos);
  EXPECT_NE(page.find("\\u003c/script>\\u003cb>"), std::string::npos);
}

TEST(DotView, IsAPassManagerDotWriter) {
  auto m = buildTowerGraph({});
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("graphc-dot-dump", dir));
  DumpOptions dump;
  dump.dumpDir = dir.str().str();
  dump.dumpDot = true;
  CompileOptions o;
  o.placer = makePlacerFunction(Cluster::defaultCluster(2), anyKernelAnywhere);
  PassManager pm(o, dump);
  pm.setDotWriter(writeDot);
  ASSERT_EQ(errorText(pm.addPipeline("place-devices,insert-transfers")), "");
  ASSERT_EQ(errorText(pm.run(*m)), "");
  for (const char *file : {"0001.after_place-devices.dot", "0002.after_insert-transfers.dot"}) {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, file);
    auto text = llvm::MemoryBuffer::getFile(path);
    ASSERT_TRUE(bool(text)) << path.str().str();
    EXPECT_TRUE((*text)->getBuffer().startswith("digraph \"towers\" {")) << file;
    EXPECT_TRUE((*text)->getBuffer().contains(deviceColor(DeviceId::gpu(1)))) << file;
  }
  EXPECT_TRUE(toDot(*m).find("to_gpu_1") != std::string::npos);
  llvm::sys::fs::remove_directories(dir);
}
