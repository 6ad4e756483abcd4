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

#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <random>

using namespace graphc;
using namespace graphc::testing;

namespace {

struct BadCase {
  const char *file;
  std::vector<const char *> expected; ///< substrings of the message
};

void PrintTo(const BadCase &c, std::ostream *os) {
  *os << c.file;
}

class OnnxBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(OnnxBadInput, GivesOneClearError) {
  std::string err = importError(GetParam().file);
  ASSERT_NE(err, "") << GetParam().file << " imported";
  for (const char *s : GetParam().expected)
    EXPECT_NE(err.find(s), std::string::npos) << "'" << s << "' not in: " << err;
}

INSTANTIATE_TEST_SUITE_P(
    Frontend, OnnxBadInput,
    ::testing::Values(
        BadCase{"empty.onnx", {"empty.onnx' is empty"}},
        BadCase{"text.onnx", {"text.onnx' is not an ONNX model"}},
        BadCase{"random.onnx", {"random.onnx' is not an ONNX model"}},
        BadCase{"truncated.onnx", {"truncated.onnx'", "truncated"}},
        BadCase{"no_graph.onnx", {"no graph"}},
        BadCase{"old_opset.onnx", {"opset 5", "opsets 7 to 21"}},
        BadCase{"unsupported_op.onnx", {"node 'block/TopK' (TopK, opset 17): unsupported op"}},
        BadCase{"custom_domain.onnx",
                {"node 'ms/FusedGemm' (com.microsoft.FusedGemm, com.microsoft opset 1): "
                 "unsupported op"}},
        BadCase{"shape_mismatch.onnx", {"node 'fc2/MatMul' (MatMul)", "'fc1/MatMul'", "differ"}},
        BadCase{"missing_input.onnx",
                {"node 'head/Add' (Add, opset 17): input 'ghost' is not a graph input, an "
                 "initializer or an output of any node"}},
        BadCase{"bad_dtype.onnx", {"graph input 'x'", "DOUBLE", "does not handle"}},
        BadCase{"bad_cast.onnx", {"node 'to/Cast' (Cast, opset 17)", "DOUBLE"}},
        BadCase{"dynamic_dim.onnx", {"graph input 'x'", "'C' at axis 1", "only axis 0"}},
        BadCase{"cycle.onnx", {"cycle", "loop/"}},
        BadCase{"dropped_output_used.onnx",
                {"node 'use/Add' (Add, opset 17)", "'bn/BatchNormalization'", "does not model"}},
        BadCase{"layernorm_stats_used.onnx",
                {"node 'use/Add' (Add, opset 17)", "'ln/LayerNormalization'",
                 "Mean and InvStdDev outputs"}},
        BadCase{
            "layernorm_opset16.onnx",
            {"node 'ln/LayerNormalization' (LayerNormalization, opset 16)", "opset 17 and later"}},
        BadCase{
            "several_unsupported.onnx",
            {"uses 3 ops that graphc does not import (opset 17): TopK (node 'a/TopK' and 1 "
             "more); NonZero (node 'b/NonZero'); com.microsoft.FusedGemm (node 'ms/FusedGemm')"}},
        BadCase{
            "runtime_shape.onnx",
            {"node 'r/Reshape' (Reshape, opset 17): shape (input 'shape') must be known at import "
             "time, but it is a runtime value, a graph input"}},
        BadCase{"does_not_exist.onnx", {"cannot read", "does_not_exist.onnx"}}),
    [](const ::testing::TestParamInfo<BadCase> &info) {
      std::string n = info.param.file;
      return n.substr(0, n.find('.'));
    });

/// Every prefix and many corrupted copies of a real model: an error or a
/// module that verifies, never a crash or a hang.
TEST(OnnxBadInput, TruncatedAndCorruptedBytesNeverCrash) {
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

/// Random structural edits of real models (inputs cleared or rewired, ops
/// swapped, attributes and dimensions changed, nodes removed): each import
/// is an error or a module that verifies, never a crash.
TEST(OnnxBadInput, MutatedGraphsNeverCrash) {
  const char *ops[] = {"Conv",
                       "Relu",
                       "Add",
                       "Reshape",
                       "Concat",
                       "Split",
                       "Slice",
                       "Pad",
                       "Gather",
                       "Shape",
                       "Squeeze",
                       "Unsqueeze",
                       "Cast",
                       "Identity",
                       "Constant",
                       "Gemm",
                       "MatMul",
                       "Clip",
                       "Dropout",
                       "ReduceSum",
                       "BatchNormalization",
                       "ConstantOfShape",
                       "Transpose",
                       "MaxPool",
                       "Softmax",
                       "Flatten",
                       "Expand",
                       "TopK"};
  std::mt19937_64 rng(2024);
  auto pick = [&](size_t n) { return (size_t)(rng() % std::max<size_t>(n, 1)); };
  // GRAPHC_FUZZ_ITERATIONS runs longer campaigns by hand.
  const char *env = std::getenv("GRAPHC_FUZZ_ITERATIONS");
  int iterations = env ? std::max(1, atoi(env)) : 400;
  unsigned imported = 0, runs = 0;
  for (const char *file : {"allops_train_17.onnx", "allops_eval_9.onnx", "opset18_forms.onnx"}) {
    auto buf = llvm::MemoryBuffer::getFile(modelPath(file));
    ASSERT_TRUE(bool(buf));
    onnx::ModelProto original;
    ASSERT_TRUE(original.ParseFromArray((*buf)->getBufferStart(), (int)(*buf)->getBufferSize()));
    std::vector<std::string> names;
    for (const auto &n : original.graph().node())
      names.insert(names.end(), n.output().begin(), n.output().end());
    for (int iteration = 0; iteration < iterations; ++iteration, ++runs) {
      onnx::ModelProto m = original;
      onnx::GraphProto &g = *m.mutable_graph();
      for (int edits = 1 + pick(3); edits > 0; --edits) {
        onnx::NodeProto &n = *g.mutable_node(pick(g.node_size()));
        switch (pick(9)) {
        case 0:
          if (n.input_size())
            n.set_input(pick(n.input_size()), "");
          break;
        case 1:
          if (n.input_size())
            n.set_input(pick(n.input_size()), names[pick(names.size())]);
          break;
        case 2:
          n.set_op_type(ops[pick(std::size(ops))]);
          break;
        case 3:
          if (n.attribute_size())
            n.mutable_attribute()->DeleteSubrange(pick(n.attribute_size()), 1);
          break;
        case 4:
          for (auto &a : *n.mutable_attribute()) {
            a.set_i((int64_t)pick(7) - 3);
            for (int k = 0; k < a.ints_size(); ++k)
              a.set_ints(k, (int64_t)pick(9) - 4);
          }
          break;
        case 5:
          g.mutable_node()->DeleteSubrange(pick(g.node_size()), 1);
          break;
        case 6:
          if (n.output_size())
            n.set_output(pick(n.output_size()), "");
          break;
        case 7:
          if (g.initializer_size()) {
            auto &t = *g.mutable_initializer(pick(g.initializer_size()));
            if (t.dims_size())
              t.set_dims(pick(t.dims_size()), (int64_t)pick(40));
          }
          break;
        default:
          if (g.input_size()) {
            auto *shape =
                g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
            if (shape->dim_size())
              shape->mutable_dim(pick(shape->dim_size()))->set_dim_value((int64_t)pick(40));
          }
        }
      }
      std::string bytes;
      ASSERT_TRUE(m.SerializeToString(&bytes));
      auto module = importOnnxBytes(bytes);
      if (!module) {
        EXPECT_FALSE(llvm::toString(module.takeError()).empty());
        continue;
      }
      ++imported;
      EXPECT_FALSE(bool(verify(**module)));
    }
  }
  // Some edits keep the model valid; most do not.
  EXPECT_GT(imported, 0u);
  EXPECT_LT(imported, runs);
}

} // namespace

/// The lenient accepts, each now one error naming the tensor: edits
/// of a real model (mlp_13: fc1/Gemm, ReLU, fc2/Gemm, output "y").
TEST(OnnxBadInput, DeclaredTypesAndSizesMustHold) {
  auto buf = llvm::MemoryBuffer::getFile(modelPath("mlp_13.onnx"));
  ASSERT_TRUE(bool(buf));
  onnx::ModelProto original;
  ASSERT_TRUE(original.ParseFromArray((*buf)->getBufferStart(), (int)(*buf)->getBufferSize()));
  auto importError = [](const onnx::ModelProto &m) -> std::string {
    std::string bytes;
    m.SerializeToString(&bytes);
    auto imported = importOnnxBytes(bytes, {}, "edited.onnx");
    if (imported)
      return "imported";
    std::string msg = llvm::toString(imported.takeError());
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  };
  auto expect = [&](const onnx::ModelProto &m, const std::vector<std::string> &fragments) {
    std::string msg = importError(m);
    for (const std::string &f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  };
  ASSERT_EQ(importError(original), "imported");
  auto outputType = [](onnx::ModelProto &m) {
    return m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type();
  };
  auto initializer = [](onnx::ModelProto &m, llvm::StringRef name) -> onnx::TensorProto & {
    for (auto &t : *m.mutable_graph()->mutable_initializer())
      if (t.name() == name)
        return t;
    ADD_FAILURE() << "no initializer " << name.str();
    return *m.mutable_graph()->mutable_initializer(0);
  };

  onnx::ModelProto m = original;
  outputType(m)->set_elem_type(99);
  expect(m, {"graph output 'y' is declared with element type type 99", "computes f32[N,"});
  for (int64_t d : {int64_t(-1), std::numeric_limits<int64_t>::min()}) {
    m = original;
    outputType(m)->mutable_shape()->mutable_dim(1)->set_dim_value(d);
    expect(m, {"graph output 'y' has a negative dimension (" + std::to_string(d) + ") at axis 1"});
    m = original;
    auto *in = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type();
    in->mutable_shape()->mutable_dim(1)->set_dim_value(d);
    expect(m, {"graph input 'x'", "negative dimension (" + std::to_string(d) + ") at axis 1"});
  }
  m = original;
  outputType(m)->mutable_shape()->mutable_dim(1)->set_dim_value(7);
  expect(m, {"graph output 'y' is declared with dimension 7 at axis 1"});

  // The weight's float bytes relabelled INT32 (same size): no longer read as
  // int32 weights of a float Gemm.
  m = original;
  initializer(m, "fc1.weight").set_data_type(onnx::TensorProto::INT32);
  expect(m, {"node 'fc1/Gemm' (Gemm)", "'fc1.weight'", "(i32[", "different dtypes"});
  // Dimensions whose product wraps, and a negative one.
  m = original;
  auto &w = initializer(m, "fc1.weight");
  w.set_dims(0, int64_t(1) << 62);
  w.set_dims(1, 4);
  expect(m, {"initializer 'fc1.weight'", "is larger than the 1 TiB a tensor may take"});
  m = original;
  initializer(m, "fc1.weight").set_dims(0, -2);
  expect(m, {"initializer 'fc1.weight' has a negative dimension (-2)"});
  // A name with a newline is quoted on one line.
  m = original;
  m.mutable_graph()->mutable_node(0)->set_op_type("TopK\nInjected");
  expect(m, {"TopK\\nInjected"});
  // Issue 28: a graph without outputs computes nothing any command can use.
  m = original;
  m.mutable_graph()->clear_output();
  expect(m, {"the graph has no outputs; a model computes at least one"});
}
