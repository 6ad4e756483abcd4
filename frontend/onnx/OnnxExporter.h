//===- OnnxExporter.h - The forward graph back to ONNX ----------*- C++ -*-===//
//
// Writes a module's graph "main" and its variables as an ONNX model (IR
// version 8, opset 17) that onnx.checker accepts. Variables become
// initializers; those without data are materialised with initialValue(seed).
// Importing the result gives back the imported module (structurallyEqual).
// Training-only ops (gradients, updates, training forms, collectives) are an
// error naming the node: "cannot export ...".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <string>

namespace graphc {

/// The serialized ModelProto.
llvm::Expected<std::string> exportOnnxBytes(const Module &m, uint64_t seed = 0);

/// Writes the model crash-safely (ir/OutputFile.h).
llvm::Error exportOnnxFile(const Module &m, llvm::StringRef path, uint64_t seed = 0);

} // namespace graphc
