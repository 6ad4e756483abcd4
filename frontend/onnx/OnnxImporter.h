//===- OnnxImporter.h - ONNX models into the IR -----------------*- C++ -*-===//
//
// Imports an ONNX model (default domain, opsets 7 to 21) into a Module with
// one graph "main":
//   - graph inputs become Input nodes; a dynamic dimension at axis 0 is the
//     symbolic batch N (bound at once when ImportOptions::batch is set, or
//     when batchIfNeeded is and the graph computes with N: the import stops
//     where it would need a bound batch and runs again bound), any other
//     dynamic dimension is an error naming the input; a model whose inputs
//     all have the same fixed size at axis 0 has that batch, bound (the
//     module's plan says so whatever ImportOptions::batch asks; rebatching it
//     is passes/Rebatch.h's);
//   - initializers read as data become module variables (BatchNormalization
//     running statistics as VarKind::State, the rest as VarKind::Param);
//     integer initializers and constants feeding shapes are folded, as are
//     Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains;
//   - weights declared without data (graph inputs that only feed weight
//     slots, or initializers without data) get PyTorch's default initializers;
//   - node names keep the model's scopes ("/Mixed_5b/Conv" -> "Mixed_5b/Conv").
// Anything the importer cannot represent is one llvm::Error naming the node,
// the op and the opset. docs/onnx-frontend.md lists the op mapping.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/onnx/ImportOptions.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace graphc {

/// Reads and imports an ONNX file. Initializers stored as external data are
/// read relative to the file's directory.
llvm::Expected<std::unique_ptr<Module>> importOnnxFile(llvm::StringRef path,
                                                       const ImportOptions &opts = {});

/// Imports a serialized ONNX ModelProto. `name` appears in error messages.
llvm::Expected<std::unique_ptr<Module>> importOnnxBytes(llvm::StringRef bytes,
                                                        const ImportOptions &opts = {},
                                                        llvm::StringRef name = "<onnx>");

} // namespace graphc
