//===- Inference.h - `graphrun infer`: a model on NumPy inputs ---*- C++ -*-===//
//
// Loads any model graphc reads (ONNX, text IR, module file, checkpoint), binds
// the batch to the first input's leading dimension, runs one step and writes
// every graph output as .npy (crash-safely). Input types are checked against
// the graph's inputs and any mismatch names the input.
//
// --repeat N times the step: one warm-up run (oneDNN creates its primitives
// and reorders the weights there), then N timed runs of the same feeds, and
// prints their latency (median, min, 90th percentile) and throughput. The
// outputs written are the last run's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"

#include "llvm/Support/raw_ostream.h"

namespace graphc {

struct InferOptions {
  std::string model;
  std::vector<std::string> inputs;
  std::string output;
  int repeat = 0; ///< timed runs after a warm-up (0: one untimed run)
  bool profile = false; ///< print the per-op time table after the runs
  ExecutorOptions executor;
};

llvm::Error runInference(const InferOptions &opts, llvm::raw_ostream &out);

} // namespace graphc
