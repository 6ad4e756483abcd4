//===- FuzzOnnx.cpp - The ONNX importer -----------------------------------===//
//
// A serialized ModelProto through the importer: protobuf decoding, every op's
// import rule, constant folding and shape inference of what it imports. What
// the importer accepts has passed the verifier and computes at least one
// output (issue 28); shape inference run again on it, with the batch bound as
// `--batch` binds it, must not crash either.

#include "frontend/onnx/OnnxImporter.h"
#include "ir/ShapeInference.h"
#include "tests/fuzz/FuzzSupport.h"

using namespace graphc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto m = importOnnxBytes(fuzz::bytesOf(data, size), {}, "fuzz.onnx");
  if (!fuzz::accepted(m))
    return 0;
  if ((*m)->main().outputs().empty())
    fuzz::broken("the importer accepted a graph without outputs");
  if (auto e = inferShapes(**m))
    fuzz::broken("shape inference refuses a module the importer accepted", std::move(e));
  fuzz::refusedOrAccepted(bindBatch(**m, 3));
  return 0;
}
