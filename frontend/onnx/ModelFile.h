//===- ModelFile.h - Any model file graphc reads ----------------*- C++ -*-===//
//
// loadModelFile looks at a file's content, not its extension: a graphc module
// file (ir/Archive.h magic), the text IR (the first word after whitespace and
// '#' comments is `module`), or an ONNX model (a protobuf whose first field
// is one of ModelProto's). A file that is none of these is one error that
// says what was tried.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/onnx/OnnxImporter.h"

namespace graphc {

/// Loads a model. `opts` applies to ONNX as in importOnnxFile; its batch also
/// binds modules read from the other formats (bindBatch) when they are not
/// bound yet.
llvm::Expected<std::unique_ptr<Module>> loadModelFile(llvm::StringRef path,
                                                      const ImportOptions &opts = {});

} // namespace graphc
