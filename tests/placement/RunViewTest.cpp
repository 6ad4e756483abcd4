//===- RunViewTest.cpp - A run's metrics and trace beside the graph ---------===//

#include "PlacementTestUtil.h"

#include "placement/HtmlView.h"
#include "placement/Placer.h"
#include "placement/RunView.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

using namespace graphc;
using namespace graphc::testing;

namespace {

/// Two towers placed on cpu:0, gpu:0 and gpu:1.
std::unique_ptr<Module> placedTowers() {
  TowerGraphOptions o;
  auto m = buildTowerGraph(o);
  EXPECT_EQ(errorText(Placer(Cluster::defaultCluster(2), anyKernelAnywhere).run(*m)), "");
  return m;
}

const char kMetrics[] =
    R"({"kind":"step","step":1,"epoch":0,"loss":2.5,"lr":0.1,"seconds":0.2,"run":{"model":"towers","devices":["cpu:0","gpu:0","gpu:1"],"batch":8}}
{"kind":"segment","segment":1,"workers":2}

{"kind":"step","step":2,"epoch":0,"loss":2.25,"lr":0.1,"seconds":0.2}
{"kind":"eval","step":2,"epoch":1,"loss":2.1,"accuracy":0.25,"samples":64,"seconds":1}
{"kind":"step","step":3,"epoch":1,"loss":2.0,"lr":0.05,"seconds":0.2}
{"kind":"step","step":3,"epoch":1,"loss":1.75,"lr":0.05,"seconds":0.2,"run":{"model":"towers","devices":["cpu:0","gpu:0","gpu:1"],"batch":8}}
{"kind":"eval","step":3,"epoch":1,"loss":0.5,"samples":64,"seconds":1}
)";

TEST(RunView, MetricsKeepEveryStepOnceAndTheRuns) {
  auto m = parseMetrics(kMetrics, "run.jsonl");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_EQ(m->steps.size(), 3u);
  EXPECT_EQ(m->steps[0].step, 1);
  EXPECT_EQ(m->steps[1].loss, 2.25);
  EXPECT_EQ(m->steps[0].lr, 0.1);
  // Step 3 was redone after a resume: the last record wins.
  EXPECT_EQ(m->steps[2].loss, 1.75);
  EXPECT_EQ(m->steps[2].lr, 0.05);
  ASSERT_EQ(m->evals.size(), 2u);
  EXPECT_EQ(m->evals[0].step, 2);
  EXPECT_EQ(m->evals[0].accuracy, 0.25);
  EXPECT_EQ(m->evals[0].loss, 2.1);
  // A regression's evaluation (--loss mse) has a loss and no accuracy.
  EXPECT_EQ(m->evals[1].loss, 0.5);
  EXPECT_FALSE(m->evals[1].accuracy);
  ASSERT_EQ(m->runs.size(), 2u);
  EXPECT_EQ(m->runs[0].model, "towers");
  EXPECT_EQ(m->runs[0].devices, (std::vector<std::string>{"cpu:0", "gpu:0", "gpu:1"}));
  EXPECT_EQ(m->runs[0].batch, 8);
}

TEST(RunView, TheRunIsReadAsWritten) {
  auto plan = placedTowers();
  RunIdentity id = runIdentityOf(*plan);
  EXPECT_EQ(id.model, "towers");
  EXPECT_EQ(id.devices, (std::vector<std::string>{"cpu:0", "gpu:0", "gpu:1"}));
  EXPECT_EQ(id.batch, 8);
  EXPECT_EQ(runJson(id), R"({"batch":8,"devices":["cpu:0","gpu:0","gpu:1"],"model":"towers"})");
  auto m = parseMetrics(R"({"kind":"step","step":1,"loss":1,"lr":1,"run":)" + runJson(id) + "}",
                        "m.jsonl");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_EQ(m->runs.size(), 1u);
  EXPECT_EQ(m->runs[0], id);
}

/// The message of a refused file, "" when it was read.
template <typename T> std::string refusal(llvm::Expected<T> read) {
  return read ? "" : llvm::toString(read.takeError());
}

std::string metricsError(llvm::StringRef text) {
  return refusal(parseMetrics(text, "run.jsonl"));
}

TEST(RunView, MalformedMetricsNameTheFileAndLine) {
  EXPECT_EQ(metricsError("{\"kind\":\"step\",\"step\":1,\"loss\":1,\"lr\":1}\n{\"kind\":\"st"),
            "run.jsonl:2: column 11: not a JSON record: Unterminated string");
  EXPECT_EQ(metricsError("[1, 2]\n"), "run.jsonl:1: not a JSON object (graphrun's --metrics "
                                      "writes one object per line)");
  EXPECT_EQ(metricsError("\n{\"step\":1}\n"), "run.jsonl:2: a record without a \"kind\"");
  EXPECT_EQ(metricsError("{\"kind\":\"step\",\"step\":1,\"lr\":1}"),
            "run.jsonl:1: a \"step\" record without a number \"loss\"");
  EXPECT_EQ(metricsError("{\"kind\":\"step\",\"step\":1,\"loss\":1,\"lr\":1}\n"
                         "{\"kind\":\"eval\",\"step\":1,\"loss\":1,\"accuracy\":\"high\"}"),
            "run.jsonl:2: a \"eval\" record without a number \"accuracy\"");
  EXPECT_EQ(
      metricsError("{\"kind\":\"step\",\"step\":1,\"loss\":1,\"lr\":1,\"run\":{\"model\":\"m\"}}"),
      "run.jsonl:1: a \"run\" needs \"model\", \"devices\" (names) and \"batch\"");
  EXPECT_EQ(
      metricsError("{\"kind\":\"step\",\"step\":1,\"loss\":1,\"lr\":1,\"run\":{\"model\":\"m\","
                   "\"batch\":1,\"devices\":[0]}}"),
      "run.jsonl:1: a \"run\" needs \"model\", \"devices\" (names) and \"batch\"");
  EXPECT_EQ(metricsError(""), "run.jsonl: no \"step\" records (is it graphrun's --metrics file?)");
  EXPECT_EQ(metricsError("{\"kind\":\"eval\",\"step\":1,\"loss\":1,\"accuracy\":0.5}"),
            "run.jsonl: no \"step\" records (is it graphrun's --metrics file?)");
}

TEST(RunView, MetricsFilesThatCannotBeRead) {
  auto missing = readMetrics("/nonexistent/run.jsonl");
  ASSERT_FALSE(bool(missing));
  std::string text = llvm::toString(missing.takeError());
  EXPECT_NE(text.find("metrics '/nonexistent/run.jsonl'"), std::string::npos) << text;
  auto csv = readMetrics("run.csv");
  ASSERT_FALSE(bool(csv));
  EXPECT_EQ(llvm::toString(csv.takeError()),
            "metrics 'run.csv': graphc view reads the JSON lines form (graphrun --metrics "
            "FILE.jsonl)");
  auto trace = readTrace("/nonexistent/trace.json");
  ASSERT_FALSE(bool(trace));
  text = llvm::toString(trace.takeError());
  EXPECT_NE(text.find("trace '/nonexistent/trace.json'"), std::string::npos) << text;
}

/// A trace as executor/Trace.cpp writes it: three steps of 10, 4 and 6 ms;
/// gpu:1's step 2 in two micro-steps.
std::string traceText() {
  llvm::json::Array events;
  auto meta = [&](int pid, const char *name) {
    events.push_back(llvm::json::Object{{"name", "process_name"},
                                        {"ph", "M"},
                                        {"pid", pid},
                                        {"args", llvm::json::Object{{"name", name}}}});
  };
  auto slice = [&](const char *cat, std::string name, int pid, double dur, int64_t step,
                   const char *part) {
    llvm::json::Object e{{"name", name}, {"cat", cat}, {"ph", "X"}, {"pid", pid},
                         {"tid", 9},     {"ts", 0.0},  {"dur", dur}};
    if (part)
      e["args"] = llvm::json::Object{{"part", part}, {"step", step}, {"op", part}};
    events.push_back(std::move(e));
  };
  meta(0, "step");
  meta(1, "cpu:0");
  meta(2, "gpu:0@cpu:1");
  meta(3, "gpu:1@cpu:2");
  // A kernel event: not what the view reads.
  slice("compute", "tower_0/dense/MatMul", 2, 99000, 1, nullptr);
  slice("step", "step 0", 0, 10000, 0, nullptr);
  slice("step", "step 1", 0, 4000, 1, nullptr);
  slice("step", "step 2 micro-step 0", 0, 2000, 2, nullptr);
  slice("step", "step 2 micro-step 1", 0, 4000, 2, nullptr);
  for (int64_t step : {0, 1, 2}) {
    slice("breakdown", "MatMul", 2, 1000 * (step + 1), step, "kernels");
    slice("breakdown", "waits", 2, 500, step, "waits");
    slice("breakdown", "host", 1, 200, step, "host");
    slice("breakdown", "all", 0, 1000, step, "kernels"); // the whole step's: skipped
  }
  slice("breakdown", "MatMul", 3, 1500, 1, "kernels");
  slice("breakdown", "MatMul", 3, 1000, 2, "kernels");
  slice("breakdown", "MatMul", 3, 2000, 2, "kernels");
  slice("breakdown", "AllReduce", 3, 300, 2, "collectives");
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::json::Value(std::move(events));
  return os.str();
}

TEST(RunView, TraceGivesTheMeanStepAndEachDevicesParts) {
  auto t = parseTrace(traceText(), "trace.json");
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  EXPECT_EQ(t->profiledSteps, 3u);
  // The first step is left out of the mean, as graphrun's step breakdown does.
  EXPECT_EQ(t->averagedSteps, 2u);
  EXPECT_EQ(t->firstAveraged, 2);
  EXPECT_EQ(t->lastAveraged, 3);
  EXPECT_DOUBLE_EQ(t->firstStepMs, 10);
  EXPECT_DOUBLE_EQ(t->wallMs, 5); // (4 + 2 + 4) / 2
  ASSERT_GE(t->parts.size(), 9u);
  EXPECT_EQ(t->parts[0], "kernels");
  EXPECT_EQ(t->parts[1], "collectives");
  ASSERT_EQ(t->devices.size(), 3u);
  EXPECT_EQ(t->devices[0].name, "cpu:0");
  EXPECT_EQ(t->devices[1].name, "gpu:0"); // not "gpu:0@cpu:1"
  EXPECT_EQ(t->devices[2].name, "gpu:1");
  EXPECT_DOUBLE_EQ(t->devices[0].busyMs(), 0);
  EXPECT_DOUBLE_EQ(t->devices[1].busyMs(), 2.5);  // (2 + 3) / 2
  EXPECT_DOUBLE_EQ(t->devices[2].busyMs(), 2.25); // (1.5 + 1 + 2) / 2
  EXPECT_DOUBLE_EQ(t->devices[2].partMs[1], 0.15);
  auto waits = std::find(t->parts.begin(), t->parts.end(), "waits") - t->parts.begin();
  EXPECT_DOUBLE_EQ(t->devices[1].partMs[waits], 0.5);
}

TEST(RunView, OneStepIsItsOwnMean) {
  llvm::json::Array events{
      llvm::json::Object{{"name", "process_name"},
                         {"ph", "M"},
                         {"pid", 1},
                         {"args", llvm::json::Object{{"name", "cpu:0"}}}},
      llvm::json::Object{{"name", "step 0"}, {"cat", "step"}, {"pid", 0}, {"dur", 8000.0}}};
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(events));
  auto t = parseTrace(text, "t.json");
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  EXPECT_EQ(t->averagedSteps, 1u);
  EXPECT_EQ(t->firstAveraged, 1);
  EXPECT_DOUBLE_EQ(t->wallMs, 8);
  EXPECT_DOUBLE_EQ(t->firstStepMs, 0);
}

std::string traceError(llvm::StringRef text) {
  return refusal(parseTrace(text, "trace.json"));
}

TEST(RunView, MalformedTracesNameTheFileAndEvent) {
  EXPECT_EQ(traceError("[{\"ph\":"),
            "trace.json: not a JSON trace: it ends inside event 0 (cut short?)");
  EXPECT_EQ(traceError("[{\"name\":\"a \\\"}\\\" b\"}, {\"ph\":\"M\"}"),
            "trace.json: not a JSON trace: it ends after event 1 (cut short?)");
  EXPECT_EQ(traceError("[{}, "),
            "trace.json: not a JSON trace: it ends before event 1 (cut short?)");
  EXPECT_EQ(traceError("[{} {}]"), "trace.json: not a JSON trace: after event 0: {}]");
  EXPECT_EQ(traceError("[{\"cat\":\"step\", \"pid\":}]"),
            "trace.json: event 0: not JSON: [1:22, byte=22]: Invalid JSON value");
  EXPECT_EQ(traceError("{}"), "trace.json: not graphrun's --trace (a JSON array of events)");
  EXPECT_EQ(traceError("[1]"), "trace.json: event 0 is not a JSON object");
  EXPECT_EQ(traceError("[]"), "trace.json: no step slices (graphrun train --trace writes them)");
  EXPECT_EQ(traceError("[{\"cat\":\"step\",\"name\":\"step 0\",\"pid\":0}]"),
            "trace.json: event 0 (\"step\"): needs \"pid\" and a \"dur\" of at least 0");
  EXPECT_EQ(traceError("[{\"cat\":\"step\",\"name\":\"warm-up\",\"pid\":0,\"dur\":1}]"),
            "trace.json: event 0 (\"step\"): a step slice named \"step N\"");
  EXPECT_EQ(traceError("[{\"cat\":\"breakdown\",\"pid\":4,\"dur\":1,\"args\":{\"step\":0}}]"),
            "trace.json: event 0 (\"breakdown\"): a breakdown slice needs args \"part\" and "
            "\"step\"");
  EXPECT_EQ(traceError("[{\"cat\":\"breakdown\",\"pid\":4,\"dur\":1,"
                       "\"args\":{\"step\":0,\"part\":\"kernels\"}}]"),
            "trace.json: event 0 (\"breakdown\"): process 4 has no process_name (no device)");
}

std::string checkText(const Module &plan, const RunMetrics *m, const RunTrace *t,
                      std::vector<std::string> &notes) {
  return errorText(checkRunMatchesPlan(plan, m, t, notes));
}

TEST(RunView, ARunOfAnotherPlanIsRefused) {
  auto plan = placedTowers();
  std::vector<std::string> notes;
  auto metrics = parseMetrics(kMetrics, "run.jsonl");
  auto trace = parseTrace(traceText(), "trace.json");
  ASSERT_TRUE(metrics && trace);
  EXPECT_EQ(checkText(*plan, &*metrics, &*trace, notes), "");
  EXPECT_TRUE(notes.empty());

  RunMetrics other = *metrics;
  other.runs.back().model = "mlp";
  EXPECT_EQ(checkText(*plan, &other, nullptr, notes),
            "run.jsonl holds a run of model 'mlp' on cpu:0, gpu:0, gpu:1 at batch 8; the plan "
            "is model 'towers' on cpu:0, gpu:0, gpu:1 at batch 8");
  other = *metrics;
  other.runs.back().devices.pop_back();
  other.runs.back().batch = 0;
  EXPECT_EQ(checkText(*plan, &other, nullptr, notes),
            "run.jsonl holds a run of model 'towers' on cpu:0, gpu:0 at batch (the model's "
            "own); the plan is model 'towers' on cpu:0, gpu:0, gpu:1 at batch 8");
  // A run resumed on other devices: the earlier run need only be of the model.
  other = *metrics;
  other.runs.front().devices = {"cpu:0", "gpu:0", "gpu:1", "gpu:2", "gpu:3"};
  EXPECT_EQ(checkText(*plan, &other, nullptr, notes), "");
  other.runs.front().model = "resnet18";
  EXPECT_NE(checkText(*plan, &other, nullptr, notes), "");

  other = *metrics;
  other.runs.clear();
  EXPECT_EQ(checkText(*plan, &other, nullptr, notes), "");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "run.jsonl does not say which run it is (written before graphrun recorded "
                      "it): not checked against the plan");

  RunTrace fewer = *trace;
  fewer.devices.pop_back();
  EXPECT_EQ(checkText(*plan, nullptr, &fewer, notes),
            "trace.json traced cpu:0, gpu:0; the plan places on cpu:0, gpu:0, gpu:1");
  RunTrace renamed = *trace;
  renamed.devices[2].name = "cpu:2";
  EXPECT_EQ(checkText(*plan, nullptr, &renamed, notes),
            "trace.json traced cpu:0, gpu:0, cpu:2; the plan places on cpu:0, gpu:0, gpu:1");
}

TEST(RunView, ThePageDataHoldsTheRun) {
  auto plan = placedTowers();
  auto metrics = parseMetrics(kMetrics, "run.jsonl");
  auto trace = parseTrace(traceText(), "trace.json");
  ASSERT_TRUE(metrics && trace);
  auto plain = llvm::json::parse(htmlViewData(*plan));
  ASSERT_TRUE(bool(plain));
  EXPECT_EQ(plain->getAsObject()->get("run"), nullptr);

  auto data = llvm::json::parse(htmlViewData(*plan, &*metrics, &*trace));
  ASSERT_TRUE(bool(data)) << llvm::toString(data.takeError());
  const llvm::json::Object &run = *data->getAsObject()->getObject("run");
  const llvm::json::Object &m = *run.getObject("metrics");
  EXPECT_EQ(*m.getString("file"), "run.jsonl");
  const llvm::json::Array &steps = *m.getArray("steps");
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const llvm::json::Array &s = *steps[i].getAsArray();
    EXPECT_EQ(*s[0].getAsInteger(), metrics->steps[i].step);
    EXPECT_EQ(*s[1].getAsNumber(), metrics->steps[i].loss);
    EXPECT_EQ(*s[2].getAsNumber(), metrics->steps[i].lr);
  }
  const llvm::json::Array &eval = *(*m.getArray("evals"))[0].getAsArray();
  EXPECT_EQ(*eval[0].getAsInteger(), 2);
  EXPECT_EQ(*eval[2].getAsNumber(), 0.25);
  const llvm::json::Array &regression = *(*m.getArray("evals"))[1].getAsArray();
  EXPECT_EQ(regression[2].kind(), llvm::json::Value::Null) << "no accuracy: null";

  const llvm::json::Object &t = *run.getObject("trace");
  EXPECT_EQ(*t.getNumber("wall_ms"), 5);
  EXPECT_EQ(*t.getInteger("profiled_steps"), 3);
  EXPECT_EQ(*(*t.getArray("averaged"))[0].getAsInteger(), 2);
  const llvm::json::Array &devices = *t.getArray("devices");
  ASSERT_EQ(devices.size(), 3u);
  const llvm::json::Array &gpu1 = *devices[2].getAsArray();
  EXPECT_EQ(*gpu1[0].getAsString(), "gpu:1");
  EXPECT_EQ(*gpu1[1].getAsNumber(), 2.25);
  EXPECT_EQ(gpu1[2].getAsArray()->size(), t.getArray("parts")->size());

  // Only the metrics, or only the trace.
  auto onlyTrace = llvm::json::parse(htmlViewData(*plan, nullptr, &*trace));
  ASSERT_TRUE(bool(onlyTrace));
  EXPECT_EQ(onlyTrace->getAsObject()->getObject("run")->get("metrics"), nullptr);
  EXPECT_NE(onlyTrace->getAsObject()->getObject("run")->get("trace"), nullptr);
}

} // namespace
