//===- HtmlViewBrowserTest.cpp - The HTML view rendered in headless Chromium ===//
//
// Writes the page of a small placed graph (4 towers), lets Chromium render it
// to a PNG and dump the DOM after the script ran, and checks that the page
// drew something (not one flat colour), that the collapsed tower boxes are
// there with their devices' colours, and that the URL hash opens a tower and
// selects a node whose details name its device and placement reason. A
// harness page drives the page's controls (clicks on boxes, headers and nodes,
// search, the buttons, wheel zoom, drag) through an iframe, and the run panel
// of a page with a run (its loss line, bars, a click on a device, the
// pointer's readout). Skips only when
// Chromium is not installed. The files stay in the build directory
// (test-output/placement/) to be looked at.
//
//===----------------------------------------------------------------------===//

#include "PlacementTestUtil.h"

#include "passes/InsertTransfers.h"
#include "placement/HtmlView.h"
#include "placement/Placer.h"
#include "placement/RunView.h"
#include "placement/ViewTree.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>
#include <png.h>

#include <set>

using namespace graphc;
using namespace graphc::testing;

namespace {

std::string outputDir();

/// Files of the running test: tests run in parallel under ctest, so each
/// gets its own page, outputs and Chromium profile.
std::string testFile(llvm::StringRef suffix) {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return outputDir() + "/" + name + suffix.str();
}

std::string outputDir() {
  llvm::SmallString<256> dir(GRAPHC_BINARY_DIR);
  llvm::sys::path::append(dir, "test-output", "placement");
  llvm::sys::fs::create_directories(dir);
  return dir.str().str();
}

std::optional<std::string> findChromium() {
  for (const char *name : {"chromium", "chromium-browser", "google-chrome"})
    if (auto p = llvm::sys::findProgramByName(name))
      return *p;
  return std::nullopt;
}

/// Runs Chromium headless on `url` with `extra` flags; stdout to `out`.
int runChromium(const std::string &chromium, llvm::ArrayRef<std::string> extra,
                const std::string &url, const std::string &out, const std::string &log) {
  std::string profile = testFile(".profile");
  std::vector<std::string> args{
      chromium,         "--headless",           "--no-sandbox",      "--disable-gpu",
      "--no-first-run", "--disable-extensions", "--hide-scrollbars", "--user-data-dir=" + profile};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(url);
  std::vector<llvm::StringRef> refs(args.begin(), args.end());
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), llvm::StringRef(out),
                                                 llvm::StringRef(log)};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(chromium, refs, llvm::None, redirects, 120, 0, &message);
  EXPECT_EQ(rc, 0) << message << " (log: " << log << ")";
  return rc;
}

std::string readFile(const std::string &path) {
  auto b = llvm::MemoryBuffer::getFile(path);
  return b ? (*b)->getBuffer().str() : std::string();
}

struct Rgb {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;
  unsigned count(const std::string &hex) const {
    unsigned r = std::stoul(hex.substr(1, 2), nullptr, 16),
             g = std::stoul(hex.substr(3, 2), nullptr, 16),
             b = std::stoul(hex.substr(5, 2), nullptr, 16);
    unsigned n = 0;
    for (size_t i = 0; i + 2 < pixels.size(); i += 3)
      n += pixels[i] == r && pixels[i + 1] == g && pixels[i + 2] == b;
    return n;
  }
};

Rgb readPng(const std::string &path) {
  Rgb out;
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) {
    ADD_FAILURE() << "cannot read PNG " << path << ": " << image.message;
    return out;
  }
  image.format = PNG_FORMAT_RGB;
  out.pixels.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.pixels.data(), 0, nullptr)) {
    ADD_FAILURE() << "cannot decode PNG " << path << ": " << image.message;
    out.pixels.clear();
    return out;
  }
  out.width = image.width;
  out.height = image.height;
  return out;
}

class HtmlViewInBrowser : public ::testing::Test {
protected:
  void SetUp() override {
    auto c = findChromium();
    if (!c)
      GTEST_SKIP() << "Chromium is not installed (Debian package chromium; scripts/install-deps)";
    chromium_ = *c;
    TowerGraphOptions o;
    o.towers = 4;
    o.batch = 16;
    module_ = buildTowerGraph(o);
    Cluster cluster = Cluster::defaultCluster(4);
    ASSERT_EQ(errorText(Placer(cluster, anyKernelAnywhere).run(*module_)), "");
    ASSERT_TRUE(bool(insertTransfers(*module_)));
    module_->plan().cluster = cluster;
    page_ = testFile(".html");
    std::error_code ec;
    llvm::raw_fd_ostream os(page_, ec);
    ASSERT_FALSE(ec) << ec.message();
    writeHtmlView(*module_, os);
  }

  /// Rewrites the page with a run of the plan: `steps` steps with one
  /// evaluation, a trace of every device (gpu:K busy (K + 1) ms of 10).
  void writePageWithRun(int steps) {
    std::string metrics;
    for (int s = 1; s <= steps; ++s)
      metrics += "{\"kind\":\"step\",\"step\":" + std::to_string(s) +
                 ",\"loss\":" + std::to_string(3.0 / s) + ",\"lr\":0.1" +
                 (s == 1 ? ",\"run\":" + runJson(runIdentityOf(*module_)) : "") + "}\n";
    metrics += "{\"kind\":\"eval\",\"step\":" + std::to_string(steps) +
               ",\"loss\":1.5,\"accuracy\":0.6}\n";
    auto m = parseMetrics(metrics, "run.jsonl");
    ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
    std::string trace = "[";
    int pid = 1;
    for (DeviceId d : devicesOf(*module_)) {
      std::string name = d.str(), p = std::to_string(pid++);
      trace += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + p + ",\"args\":{\"name\":\"" +
               name + "\"}},";
      double busy = d.isGpu() ? 1000.0 * (d.index + 1) : 500;
      trace += "{\"cat\":\"breakdown\",\"pid\":" + p + ",\"dur\":" + std::to_string(busy) +
               ",\"args\":{\"part\":\"kernels\",\"step\":0}},";
    }
    trace += "{\"cat\":\"step\",\"name\":\"step 0\",\"pid\":0,\"dur\":10000}]";
    auto t = parseTrace(trace, "trace.json");
    ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
    std::vector<std::string> notes;
    ASSERT_EQ(errorText(checkRunMatchesPlan(*module_, &*m, &*t, notes)), "");
    std::error_code ec;
    llvm::raw_fd_ostream os(page_, ec);
    ASSERT_FALSE(ec) << ec.message();
    writeHtmlView(*module_, os, &*m, &*t);
  }

  std::string chromium_, page_;
  std::unique_ptr<Module> module_;
};

} // namespace

TEST_F(HtmlViewInBrowser, ScreenshotShowsTheCollapsedTowersInTheirColours) {
  std::string png = testFile(".png");
  llvm::sys::fs::remove(png);
  ASSERT_EQ(runChromium(chromium_, {"--window-size=1280,800", "--screenshot=" + png},
                        "file://" + page_, testFile(".out"), testFile(".log")),
            0);
  ASSERT_TRUE(llvm::sys::fs::exists(png)) << png;
  Rgb image = readPng(png);
  ASSERT_EQ(image.width, 1280);
  ASSERT_EQ(image.height, 800);
  std::set<uint32_t> colours;
  for (size_t i = 0; i + 2 < image.pixels.size(); i += 3)
    colours.insert(image.pixels[i] << 16 | image.pixels[i + 1] << 8 | image.pixels[i + 2]);
  EXPECT_GT(colours.size(), 50u) << "the page looks blank";
  // Each collapsed tower box is filled mostly with its GPU's colour.
  for (unsigned k = 0; k < 4; ++k)
    EXPECT_GT(image.count(deviceColor(DeviceId::gpu(k))), 2000u)
        << "gpu:" << k << " " << deviceColor(DeviceId::gpu(k));
}

TEST_F(HtmlViewInBrowser, DomShowsCollapsedTowerBoxes) {
  std::string dom = testFile(".dom.html");
  ASSERT_EQ(runChromium(chromium_, {"--dump-dom"}, "file://" + page_, dom, testFile(".log")), 0);
  std::string text = readFile(dom);
  EXPECT_NE(text.find("data-ready=\"1\""), std::string::npos) << "the script did not finish";
  size_t boxes = 0;
  for (size_t at = 0;
       (at = text.find("class=\"cluster collapsed tower\"", at)) != std::string::npos; ++at)
    ++boxes;
  EXPECT_EQ(boxes, 4u);
  for (int t = 0; t < 4; ++t)
    EXPECT_NE(text.find("data-label=\"tower " + std::to_string(t) + "\""), std::string::npos) << t;
  // Collapsed: no node inside a tower is drawn.
  EXPECT_EQ(text.find("data-name=\"tower_0/dense/MatMul\""), std::string::npos);
  EXPECT_NE(text.find("data-name=\"update/dense.weight\""), std::string::npos);
  // The summary panel: the cluster's devices and links as tables.
  EXPECT_NE(text.find("<th>device</th><th>kind</th><th>memory</th><th>speed</th>"),
            std::string::npos);
  EXPECT_NE(text.find("<td>gpu:3</td><td>gpu</td><td>80 GiB</td><td>1</td>"), std::string::npos);
  EXPECT_NE(text.find("<td>gpu:0 \u2013 gpu:1</td><td>450</td>"), std::string::npos);
}

TEST_F(HtmlViewInBrowser, HashOpensATowerAndSelectsANode) {
  std::string dom = testFile(".dom.html");
  ASSERT_EQ(runChromium(chromium_, {"--dump-dom"},
                        "file://" + page_ + "#expand=tower%201&select=tower_1/dense/Relu", dom,
                        testFile(".log")),
            0);
  std::string text = readFile(dom);
  EXPECT_NE(text.find("class=\"cluster expanded tower\" data-key=\"c"), std::string::npos);
  EXPECT_NE(text.find("data-label=\"tower 1\""), std::string::npos);
  EXPECT_NE(text.find("class=\"node selected\" data-key=\"n"), std::string::npos);
  EXPECT_NE(text.find("data-name=\"tower_1/dense/Relu\""), std::string::npos);
  // The details panel: op, device, requested device and reason.
  EXPECT_NE(text.find("<h2>tower_1/dense/Relu</h2>"), std::string::npos);
  EXPECT_NE(text.find("<td>requested</td><td>gpu:1</td>"), std::string::npos);
  EXPECT_NE(text.find("<td>reason</td><td>requested</td>"), std::string::npos);
  EXPECT_NE(text.find("gpu:1</span>"), std::string::npos);
  // Other towers stay collapsed.
  EXPECT_EQ(text.find("data-name=\"tower_2/dense/Relu\""), std::string::npos);
}

/// Drives the page from a parent document: `--allow-file-access-from-files`
/// lets a file:// page reach into a file:// iframe.
/// `PAGE` is the driven page, `CHECKS` what the harness does to it.
const char *const kHarness = R"(<!DOCTYPE html>
<html><body><pre id="log"></pre>
<iframe id="f" src="PAGE" width="1200" height="800"></iframe>
<script>
const log = [];
const ok = (cond, what) => log.push((cond ? 'PASS ' : 'FAIL ') + what);
document.getElementById('f').addEventListener('load', () => {
  try {
    const w = document.getElementById('f').contentWindow, d = w.document;
    const q = s => d.querySelector(s);
    const click = el => el.dispatchEvent(new w.MouseEvent('click', {bubbles: true}));
CHECKS  } catch (e) {
    log.push('FAIL exception: ' + e);
  }
  document.getElementById('log').textContent = log.join('\n');
});
</script></body></html>
)";

const char *const kControlChecks = R"(
    ok(d.body.getAttribute('data-ready') === '1', 'page ready');
    click(q('.cluster.collapsed[data-label="tower 1"] rect'));
    ok(!!q('.cluster.expanded[data-label="tower 1"]'), 'a click on a box expands it');
    ok(!!q('.node[data-name="tower_1/loss/ReduceMean"]'), 'its nodes are drawn');
    ok(q('#panel h2').textContent === 'tower 1', 'the box is described');
    click(q('.cluster.expanded[data-label="tower 1"] .header rect'));
    ok(!!q('.cluster.collapsed[data-label="tower 1"]'), 'a click on its title collapses it');
    ok(!q('.node[data-name="tower_1/loss/ReduceMean"]'), 'its nodes are hidden again');
    click(q('.node[data-name="split"] rect'));
    ok(q('#panel h2').textContent === 'split', 'a click on a node shows its details');
    ok(q('#panel').textContent.includes('SplitBatch'), 'with its op');
    const s = q('#search');
    s.value = 'tower_2/dense/relu';
    s.dispatchEvent(new w.Event('input'));
    ok(q('#matches').children.length === 1, 'search lists the match');
    s.dispatchEvent(new w.KeyboardEvent('keydown', {key: 'Enter'}));
    ok(!!q('.node.selected[data-name="tower_2/dense/Relu"]'), 'enter opens the way and selects');
    ok(!!q('.cluster.expanded[data-label="tower 2"]'), 'the tower was opened');
    q('#collapse').click();
    ok(d.querySelectorAll('.cluster.expanded').length === 0, 'collapse all');
    q('#expand-level').click();
    ok(d.querySelectorAll('.cluster.expanded.tower').length === 4, 'expand one level');
    q('#fit').click();
    const t0 = q('#viewport').getAttribute('transform');
    q('#canvas').dispatchEvent(new w.WheelEvent('wheel',
      {deltaY: -400, clientX: 300, clientY: 300, bubbles: true, cancelable: true}));
    const t1 = q('#viewport').getAttribute('transform');
    ok(t1 !== t0, 'the wheel zooms');
    q('#canvas').dispatchEvent(new w.MouseEvent('mousedown', {clientX: 100, clientY: 100, bubbles: true}));
    w.dispatchEvent(new w.MouseEvent('mousemove', {clientX: 180, clientY: 150}));
    w.dispatchEvent(new w.MouseEvent('mouseup', {clientX: 180, clientY: 150}));
    ok(q('#viewport').getAttribute('transform') !== t1, 'dragging pans');
)";

/// The harness's log after it ran `checks` on this test's page.
std::string driveThePage(const std::string &chromium, llvm::StringRef checks) {
  std::string harness = testFile(".harness.html");
  {
    std::string text = kHarness;
    text.replace(text.find("PAGE"), 4, llvm::sys::path::filename(testFile(".html")).str());
    text.replace(text.find("CHECKS"), 6, checks.str());
    std::error_code ec;
    llvm::raw_fd_ostream os(harness, ec);
    EXPECT_FALSE(ec) << ec.message();
    os << text;
  }
  std::string dom = testFile(".dom.html");
  EXPECT_EQ(runChromium(chromium, {"--dump-dom", "--allow-file-access-from-files"},
                        "file://" + harness, dom, testFile(".log")),
            0);
  std::string text = readFile(dom);
  size_t from = text.find("<pre id=\"log\">"), to = text.find("</pre>");
  if (from == std::string::npos || to == std::string::npos)
    return "FAIL no log in " + dom;
  return text.substr(from + 14, to - from - 14);
}

TEST_F(HtmlViewInBrowser, ControlsWorkWhenDriven) {
  std::string log = driveThePage(chromium_, kControlChecks);
  EXPECT_EQ(log.find("FAIL"), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n') + 1, 15) << log;
}

/// The run panel: a point of the loss line per step, the evaluation, a bar
/// per device in the plan's order, and a click on a device fading the rest.
const char *const kRunChecks = R"(
    ok(d.body.getAttribute('data-ready') === '1', 'page ready');
    ok(w.getComputedStyle(q('#run')).display === 'block', 'the run panel is shown');
    ok(q('#run polyline.loss').getAttribute('points').trim().split(' ').length === 40,
      'the loss line has a point per step');
    ok(d.querySelectorAll('#run circle.eval-loss').length === 1, 'the evaluation is a point');
    ok(q('#run').textContent.includes('learning rate 0.1 throughout'), 'a constant rate is a line of text');
    const rows = [...d.querySelectorAll('#run .busy')].map(r => r.getAttribute('data-device'));
    ok(rows.join(' ') === 'cpu:0 gpu:0 gpu:1 gpu:2 gpu:3', 'a bar per device in the plan order: ' + rows);
    ok(q('#run .busy[data-device="gpu:2"]').textContent.includes('3.0 ms 30%'), 'busy ms and share');
    const kernels = q('#run .busy[data-device="gpu:2"] .bar span');
    ok(parseFloat(kernels.style.width) === 30, 'the kernels part is 30% of the bar');
    click(q('#run .busy[data-device="gpu:2"]'));
    ok(!!q('.cluster.collapsed.faded[data-label="tower 0"]'), 'a click on gpu:2 fades tower 0');
    ok(!q('.cluster.faded[data-label="tower 2"]'), 'and not tower 2');
    ok(!!q('.node.faded[data-name="split"]'), 'and the host nodes');
    click(q('#run .busy[data-device="gpu:2"]'));
    ok(d.querySelectorAll('.faded').length === 0, 'a second click clears it');
    const chart = q('#run svg.chart'), r = chart.getBoundingClientRect();
    chart.dispatchEvent(new w.MouseEvent('mousemove', {clientX: r.left + 279, clientY: r.top + 30}));
    ok(/^step 40: loss 0.075/.test(q('#run .readout').textContent), 'the pointer reads a step off: ' +
      q('#run .readout').textContent);
)";

TEST_F(HtmlViewInBrowser, RunPanelWorksWhenDriven) {
  writePageWithRun(40);
  std::string log = driveThePage(chromium_, kRunChecks);
  EXPECT_EQ(log.find("FAIL"), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n') + 1, 13) << log;
}
