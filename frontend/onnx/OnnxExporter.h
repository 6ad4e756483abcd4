//===- OnnxExporter.h - The forward graph back to ONNX ----------*- C++ -*-===//
//
// Writes a module's graph "main" and its variables as an ONNX model (IR
// version 8, opset 17; opset 20 where the graph has a Gelu and the model it
// came from had opset 20 or later) that onnx.checker accepts. Variables become
// initializers; those without data are materialised with initialValue(seed).
//
// Two forms (ExportForm):
//  - Inference, the default: what a user deploys. BatchNormalization
//    normalises with the running statistics (no training_mode) and Dropout
//    is removed (its output is its input; a graph output keeps its name
//    through an Identity), so onnxruntime computes what
//    `graphrun infer` does, one sample at a time or in batches.
//  - Training: BatchNorm marked for training keeps training_mode = 1 and
//    Dropout keeps its training_mode input, so that importing the file gives
//    back the module it came from (structurallyEqual) and trains alike.
// Training-only ops (gradients, updates, training forms, collectives) are an
// error naming the node: "cannot export ...".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <string>

namespace graphc {

enum class ExportForm { Inference, Training };

/// The serialized ModelProto.
llvm::Expected<std::string> exportOnnxBytes(const Module &m, uint64_t seed = 0,
                                            ExportForm form = ExportForm::Inference);

/// Writes the model crash-safely (ir/OutputFile.h).
llvm::Error exportOnnxFile(const Module &m, llvm::StringRef path, uint64_t seed = 0,
                           ExportForm form = ExportForm::Inference);

} // namespace graphc
