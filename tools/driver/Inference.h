//===- Inference.h - `graphrun infer`: a model on NumPy inputs ---*- C++ -*-===//
//
// Loads any model graphc reads (ONNX, text IR, module file, checkpoint), binds
// the batch to the first input's leading dimension, runs one step and writes
// every graph output as .npy (crash-safely). Input types are checked against
// the graph's inputs and any mismatch names the input.
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
  ExecutorOptions executor;
};

llvm::Error runInference(const InferOptions &opts, llvm::raw_ostream &out);

} // namespace graphc
