//===- Progress.h - Progress line and metrics file --------------*- C++ -*-===//
//
// The progress line redraws in place on a terminal and prints a plain line
// every few percent otherwise (logs, CI). The metrics file gets one record per
// step and one per evaluation: JSON lines, or CSV when the path ends in .csv.
// Metrics are appended as they come, so a run that stops early keeps them.
// A step's record splits its seconds into compute, intra_worker, inter_worker
// and input_staging (executor/StepTimes.h), which add up to it; input_wait,
// the wait for the loader before the step, is not in its seconds. In JSON
// lines, a run's first step record also carries the run (placement/RunView.h:
// "run": model, devices, global batch), which ties the file to its plan for
// `graphc view --metrics`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/StepTimes.h"
#include "ir/OutputFile.h"
#include "placement/RunView.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace graphc {

class ProgressLine {
public:
  /// Steps `from`+1 .. `total` (a resumed run starts past 0).
  ProgressLine(llvm::raw_ostream &os, int64_t total, bool enabled, int64_t from = 0);
  /// Shows step `done` of total with the loss and throughput (and the
  /// staleness of an asynchronous update, when given).
  void update(int64_t done, int64_t epoch, double loss, double imagesPerSecond,
              std::optional<uint64_t> staleness = std::nullopt);
  /// Ends the line (before other output).
  void finish();

private:
  llvm::raw_ostream &os_;
  int64_t total_, from_;
  bool enabled_, tty_, open_ = false;
  int64_t lastPrinted_ = -1;
  std::chrono::steady_clock::time_point start_;
};

struct StepRecord {
  int64_t step, epoch;
  double loss, lr, seconds, imagesPerSecond, inputWait;
  /// Where `seconds` went (executor/StepTimes.h); inputWait, before the
  /// step, is not in it.
  StepTimes parts;
  /// Asynchronous parameter-server updates: how many updates of other
  /// workers the ps tasks applied since this worker read the variables.
  std::optional<uint64_t> staleness;
  /// Dynamic loss scaling: the scale after the step, and the steps skipped
  /// so far (gradients not finite: no update).
  std::optional<double> lossScale;
  std::optional<uint64_t> skippedSteps;
};

/// Each record is written whole as it comes, through ir/OutputFile.h's
/// OutputStream: a write that fails (a full disk, a file-size limit) is an
/// error naming the file, and the file keeps its whole records only.
class MetricsWriter {
public:
  /// `append`: keep what the file holds (a resumed run).
  static llvm::Expected<std::unique_ptr<MetricsWriter>> open(llvm::StringRef path,
                                                             bool append = false);
  /// The run whose first step comes next (JSON lines only: CSV has no
  /// column for it).
  void startRun(const RunIdentity &id) { run_ = id; }
  llvm::Error step(const StepRecord &r);
  /// An evaluation of `samples` that took `seconds`; a regression (mse) has
  /// no accuracy, and its record none.
  llvm::Error eval(int64_t step, int64_t epoch, std::optional<double> accuracy, double loss,
                   int64_t samples, double seconds);
  /// Closes the file; the run's last word on whether its records are there.
  llvm::Error close();

private:
  MetricsWriter(std::unique_ptr<OutputStream> out, bool csv) : out_(std::move(out)), csv_(csv) {}
  std::unique_ptr<OutputStream> out_;
  bool csv_;
  std::optional<RunIdentity> run_;
};

} // namespace graphc
