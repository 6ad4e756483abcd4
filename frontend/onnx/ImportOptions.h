//===- ImportOptions.h - What an ONNX import binds ----------------*- C++ -*-===//
//
// The options of importOnnxFile and importOnnxBytes (OnnxImporter.h), apart so
// that the import's internals (ImportContext.h) need not see its entry points.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace graphc {

struct ImportOptions {
  /// Binds the symbolic batch dimension at import (0: leave it symbolic).
  int64_t batch = 0;
  /// Binds the symbolic batch to this size only where the graph needs a
  /// bound one (arithmetic on it, splitting it, a tensor computed from it):
  /// the import keeps the batch symbolic when it can (0: never bind).
  int64_t batchIfNeeded = 0;
  /// Recorded as module meta "seed" when nonzero: the seed that variables
  /// without data (graph-only models) are drawn with (Initializers.h).
  uint64_t seed = 0;
};

} // namespace graphc
