//===- BadInputTest.cpp - One clear error per bad input --------------------===//
//
// Each malformed file make_models.py writes gives an llvm::Error whose
// message names what is wrong (the node, the op and the opset where there is
// one); truncated and corrupted bytes never crash.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "ir/Verifier.h"

#include "llvm/Support/MemoryBuffer.h"

using namespace graphc;
using namespace graphc::testing;

namespace {

struct BadCase {
  const char *file;
  std::vector<const char *> expected; ///< substrings of the message
};

class BadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInput, GivesOneClearError) {
  std::string err = importError(GetParam().file);
  ASSERT_NE(err, "") << GetParam().file << " imported";
  for (const char *s : GetParam().expected)
    EXPECT_NE(err.find(s), std::string::npos) << "'" << s << "' not in: " << err;
}

INSTANTIATE_TEST_SUITE_P(
    Frontend, BadInput,
    ::testing::Values(
        BadCase{"empty.onnx", {"empty.onnx' is empty"}},
        BadCase{"text.onnx", {"text.onnx' is not an ONNX model"}},
        BadCase{"random.onnx", {"random.onnx' is not an ONNX model"}},
        BadCase{"truncated.onnx", {"truncated.onnx'", "truncated"}},
        BadCase{"no_graph.onnx", {"no graph"}},
        BadCase{"old_opset.onnx", {"opset 5", "opsets 7 to 21"}},
        BadCase{"unsupported_op.onnx", {"node 'block/TopK' (TopK, opset 17): unsupported op"}},
        BadCase{"custom_domain.onnx",
                {"node 'ms/FusedGemm' (com.microsoft.FusedGemm, opset 17): unsupported op"}},
        BadCase{"shape_mismatch.onnx", {"node 'fc2/MatMul' (MatMul)", "'fc1/MatMul'", "differ"}},
        BadCase{"missing_input.onnx",
                {"node 'head/Add' (Add, opset 17): input 'ghost' is not a graph input, an "
                 "initializer or an output of any node"}},
        BadCase{"bad_dtype.onnx", {"graph input 'x'", "DOUBLE", "does not handle"}},
        BadCase{"bad_cast.onnx", {"node 'to/Cast' (Cast, opset 17)", "DOUBLE"}},
        BadCase{"dynamic_dim.onnx", {"graph input 'x'", "'C' at axis 1", "only axis 0"}},
        BadCase{"cycle.onnx", {"cycle", "loop/"}},
        BadCase{"dropped_output_used.onnx",
                {"node 'use/Add' (Add, opset 17)", "'bn/BatchNormalization'",
                 "does not model"}},
        BadCase{"runtime_shape.onnx",
                {"node 'r/Reshape' (Reshape, opset 17)", "must be known at import time"}},
        BadCase{"does_not_exist.onnx", {"cannot read", "does_not_exist.onnx"}}),
    [](const ::testing::TestParamInfo<BadCase> &info) {
      std::string n = info.param.file;
      return n.substr(0, n.find('.'));
    });

/// Every prefix and many corrupted copies of a real model: an error or a
/// module that verifies, never a crash or a hang.
TEST(BadInput, TruncatedAndCorruptedBytesNeverCrash) {
  auto buf = llvm::MemoryBuffer::getFile(modelPath("allops_train_17.onnx"));
  ASSERT_TRUE(bool(buf));
  std::string bytes = (*buf)->getBuffer().str();
  unsigned errors = 0;
  auto tryImport = [&](llvm::StringRef b) {
    auto m = importOnnxBytes(b);
    if (!m) {
      ++errors;
      EXPECT_FALSE(llvm::toString(m.takeError()).empty());
      return;
    }
    EXPECT_FALSE(bool(verify(**m)));
  };
  for (size_t len = 0; len < bytes.size(); len += 1 + len / 16)
    tryImport(llvm::StringRef(bytes).take_front(len));
  uint64_t state = 12345;
  for (int i = 0; i < 300; ++i) {
    std::string copy = bytes;
    for (int k = 0; k < 4; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      copy[(state >> 33) % copy.size()] ^= (char)(1 + (state >> 13) % 255);
    }
    tryImport(copy);
  }
  EXPECT_GT(errors, 50u);
}

} // namespace
