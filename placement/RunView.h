//===- RunView.h - What a training run recorded, beside its graph -*- C++ -*-===//
//
// `graphc view PLACED --metrics run.jsonl --trace trace.json` shows a run of
// the plan beside the graph: the loss curve (with the evaluations and the
// learning rate) from graphrun's --metrics file, and each device's busy time
// from its --trace file. This file reads both into a compact summary, checks
// that they are of the plan shown, and turns the summary into the "run" entry
// of the page's JSON (HtmlView.h).
//
//  - Metrics (JSON lines only; a .csv is refused): "step" records give step,
//    loss and learning rate, "eval" records step, loss and (a classifier's)
//    accuracy; other
//    kinds ("segment" of elastic runs) are skipped. A step recorded twice (a
//    resumed run redoes the steps after its checkpoint) keeps its last
//    record. The first step record of each run carries the run (runJson:
//    "run": {model, devices, global batch}), which ties the file to a plan:
//    every run in the file must be of the plan's model, and the last (a run
//    resumed on other devices appends its own) of its devices and batch too.
//    A field, not a record of its own kind, so that readers that take every
//    line for a step keep working. A file without one is shown unchecked,
//    with a note.
//  - Trace (graphrun's Chrome trace, executor/Trace.h): the "step" slices
//    give each step's wall time, each device's "breakdown" slices its parts
//    (executor/StepBreakdown.h). A device's busy time is its "kernels" part:
//    the time at least one of its kernels ran, kernels that overlap on
//    several streams counted once, so it never exceeds the step. Steps are
//    averaged as graphrun's step breakdown does (the first left out when
//    there are several), so the page's figures are the table graphrun
//    printed. An emulated GPU is named "gpu:0@cpu:1" (the plan's device, then
//    the CPU device that ran it); the plan's name is the part before '@'.
//
// Every malformed line or entry is one error naming the file and the line
// (metrics) or the event (trace).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace graphc {

/// What ties a metrics file to a plan: graphrun writes it into the first
/// step record of a run, the view checks it against the plan it shows.
struct RunIdentity {
  std::string model;
  std::vector<std::string> devices; ///< devicesOf(plan), host first
  int64_t batch = 0;                ///< the global batch (0: the model's own)
  bool operator==(const RunIdentity &o) const = default;
};
RunIdentity runIdentityOf(const Module &plan);
/// The value of a step record's "run": {"model":..,"devices":[..],"batch":N}.
std::string runJson(const RunIdentity &id);

struct RunMetrics {
  std::string file;
  std::vector<RunIdentity> runs; ///< the step records' "run"s, in file order
  struct Step {
    int64_t step;
    double loss, lr;
  };
  struct Eval {
    int64_t step;
    double loss;
    std::optional<double> accuracy; ///< none for a regression (--loss mse)
  };
  std::vector<Step> steps; ///< by step, one record each
  std::vector<Eval> evals; ///< by step, one record each
};

/// The metrics in `text` (a file named `file` in messages).
llvm::Expected<RunMetrics> parseMetrics(llvm::StringRef text, llvm::StringRef file);
llvm::Expected<RunMetrics> readMetrics(llvm::StringRef path);

struct RunTrace {
  std::string file;
  unsigned profiledSteps = 0, averagedSteps = 0;
  int64_t firstAveraged = 0, lastAveraged = 0; ///< step numbers from 1, as the metrics'
  double firstStepMs = 0;                      ///< when left out of the mean
  double wallMs = 0;                           ///< the mean step
  /// The breakdown's parts, in its order of precedence ("kernels" first).
  std::vector<std::string> parts;
  struct Device {
    std::string name;           ///< the plan's ("gpu:0" for "gpu:0@cpu:1")
    std::vector<double> partMs; ///< mean per step, by `parts`
    double busyMs() const { return partMs.empty() ? 0 : partMs.front(); }
  };
  std::vector<Device> devices; ///< sorted by name
};

llvm::Expected<RunTrace> parseTrace(llvm::StringRef text, llvm::StringRef file);
llvm::Expected<RunTrace> readTrace(llvm::StringRef path);

/// Errors when the metrics' runs or the trace's devices are not the
/// plan's (one line that says what each holds); notes (for the user, one
/// line each) about what could not be checked.
llvm::Error checkRunMatchesPlan(const Module &plan, const RunMetrics *metrics,
                                const RunTrace *trace, std::vector<std::string> &notes);

/// The page's "run" entry (documented at the top of view.js).
llvm::json::Value runViewData(const RunMetrics *metrics, const RunTrace *trace);

} // namespace graphc
