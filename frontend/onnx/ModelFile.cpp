//===- ModelFile.cpp - Telling model formats apart by content -------------===//
//
// The archive magic first (ir/Archive.h), then the text IR's `module`
// keyword, then a protobuf tag that starts a ModelProto; anything else is one
// error that lists what was tried.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/ModelFile.h"

#include "ir/Archive.h"
#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/Parser.h"
#include "ir/ShapeInference.h"
#include "ir/Verifier.h"

#include "llvm/ADT/StringExtras.h"

namespace graphc {
namespace {

/// The first word, after whitespace and '#' comment lines, is `module`.
bool looksLikeTextIR(llvm::StringRef s) {
  for (;;) {
    s = s.ltrim();
    if (!s.startswith("#"))
      break;
    s = s.drop_until([](char c) { return c == '\n'; });
  }
  return s.startswith("module") && (s.size() == 6 || llvm::isSpace(s[6]));
}

/// The first byte is the tag of a ModelProto field with its wire type:
/// ir_version (1, varint), producer_name .. opset_import (2-8),
/// metadata_props (14), training_info (20), functions (25).
bool looksLikeOnnx(llvm::StringRef s) {
  static constexpr unsigned char kTags[] = {0x08, 0x12, 0x1a, 0x22, 0x28, 0x32, 0x3a, 0x42, 0x72};
  unsigned char c = s[0];
  if (llvm::is_contained(kTags, c))
    return true;
  return s.size() > 1 && (unsigned char)s[1] == 0x01 && (c == 0xa2 || c == 0xca);
}

} // namespace

llvm::Expected<std::unique_ptr<Module>> loadModelFile(llvm::StringRef path,
                                                      const ImportOptions &opts) {
  auto buf = readInputFile(path);
  if (!buf)
    return buf.takeError();
  llvm::StringRef bytes = (*buf)->getBuffer();
  if (bytes.empty())
    return makeError("'" + path +
                     "' is empty; expected a graphc module file, graphc text IR or "
                     "an ONNX model");
  if (!isArchiveFile(path) && !looksLikeTextIR(bytes)) {
    if (looksLikeOnnx(bytes))
      return importOnnxFile(path, opts);
    return makeError("'" + path +
                     "' is not a model graphc can read: not a graphc module file "
                     "(no GRPHCAR magic), not graphc text IR (it does not start with "
                     "'module'), and not an ONNX model (not a protobuf ModelProto)");
  }
  auto m = isArchiveFile(path) ? readModuleFile(path) : parseModule(bytes, path);
  if (!m)
    return m.takeError();
  // Every command verifies what it read before any pass or report looks at it.
  if (auto e = verify(**m))
    return withContext(std::move(e), "'" + path + "'");
  if (opts.batch > 0 && !(*m)->batch())
    if (auto e = bindBatch(**m, opts.batch))
      return withContext(std::move(e), "'" + path + "'");
  if (opts.seed && !(*m)->plan().seed)
    (*m)->plan().seed = (int64_t)opts.seed;
  return m;
}

} // namespace graphc
