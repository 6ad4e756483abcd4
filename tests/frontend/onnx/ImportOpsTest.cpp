//===- ImportOpsTest.cpp - Every mapped op, in every form ------------------===//
//
// Small PyTorch models covering the op list at opsets 9, 11, 13 and 17 in
// eval and training mode, the opset-18 forms built with onnx.helper,
// graph-only models (seeded initializers), a fixed-batch model, and the
// format-sniffing loader.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "frontend/onnx/ModelFile.h"
#include "frontend/onnx/OnnxExporter.h"

#include "ir/Archive.h"
#include "ir/Equivalence.h"
#include "ir/Initializers.h"
#include "ir/Npy.h"
#include "ir/Printer.h"
#include "kernels/KernelRunner.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>

using namespace graphc;
using namespace graphc::testing;

namespace {

llvm::StringSet<> opsOf(const Module &m) {
  llvm::StringSet<> ops;
  for (const Node *n : m.findGraph("main")->nodes())
    ops.insert(opName(n->op()));
  return ops;
}

const Node *findByName(const Module &m, llvm::StringRef name) {
  return m.findGraph("main")->findNode(name);
}

struct OpsCase {
  const char *mode;
  int opset;
};

void PrintTo(const OpsCase &c, std::ostream *os) {
  *os << c.mode << " " << c.opset;
}

class OnnxAllOps : public ::testing::TestWithParam<OpsCase> {};

TEST_P(OnnxAllOps, ImportsEveryOpAndRoundTrips) {
  const OpsCase &c = GetParam();
  std::string file = std::string("allops_") + c.mode + "_" + std::to_string(c.opset) + ".onnx";
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath(file)));
  bool training = std::string(c.mode) == "train";
  llvm::StringSet<> ops = opsOf(*m);
  for (const char *op : {"Input",
                         "Variable",
                         "Conv",
                         "Relu",
                         "Pad",
                         "MaxPool",
                         "AveragePool",
                         "Split",
                         "Concat",
                         "Slice",
                         "GlobalAveragePool",
                         "Sigmoid",
                         "Mul",
                         "ReduceMean",
                         "Sub",
                         "Transpose",
                         "Reshape",
                         "Gemm",
                         "Tanh",
                         "LeakyRelu",
                         "Clip",
                         "Unsqueeze",
                         "ReduceSum",
                         "Div",
                         "Add",
                         "MatMul",
                         "Squeeze",
                         "Gather",
                         "Cast",
                         "Flatten",
                         "Softmax",
                         "LogSoftmax",
                         "Constant"})
    EXPECT_TRUE(ops.contains(op)) << "no " << op << " in " << file;
  EXPECT_EQ(ops.contains("BatchNorm"), training);
  EXPECT_EQ(ops.contains("Dropout"), training);

  // The Shape -> Gather -> Unsqueeze -> Concat chain folds into the shape.
  const Node *reshape = firstNode(*m, Op::Reshape);
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(reshape->attrs().getInts("shape"), (Ints{kBatchDim, 128}));
  if (training) {
    const Node *bn = firstNode(*m, Op::BatchNorm);
    ASSERT_NE(bn, nullptr);
    EXPECT_EQ(bn->attrs().getInt("training"), 1);
    EXPECT_EQ(bn->attrs().getFloat("momentum"), 0.9);
    EXPECT_EQ(bn->attrs().getFloat("epsilon"), 1e-5);
    const Node *drop = firstNode(*m, Op::Dropout);
    ASSERT_NE(drop, nullptr);
    EXPECT_FLOAT_EQ((float)drop->attrs().getFloat("ratio"), 0.25f);
    EXPECT_EQ(drop->attrs().getInt("training"), c.opset >= 12 ? 1 : 0);
    EXPECT_EQ(countElements(*m, VarKind::State), 16);
  }
  const Node *clip = firstNode(*m, Op::Clip);
  EXPECT_FLOAT_EQ((float)clip->attrs().getFloat("min"), -0.5f);
  EXPECT_FLOAT_EQ((float)clip->attrs().getFloat("max"), 0.75f);
  std::vector<std::string> outs;
  for (const Value *v : m->main().outputs())
    outs.push_back(v->name());
  EXPECT_EQ(outs, (std::vector<std::string>{"probs", "logprobs", "gate"}));
  expectRoundTrips(*m);
}

INSTANTIATE_TEST_SUITE_P(Frontend, OnnxAllOps,
                         ::testing::Values(OpsCase{"eval", 9}, OpsCase{"eval", 11},
                                           OpsCase{"eval", 13}, OpsCase{"eval", 17},
                                           OpsCase{"train", 9}, OpsCase{"train", 11},
                                           OpsCase{"train", 13}, OpsCase{"train", 17}),
                         [](const ::testing::TestParamInfo<OpsCase> &info) {
                           return std::string(info.param.mode) + "_" +
                                  std::to_string(info.param.opset);
                         });

TEST(OnnxOpset18, InputFormsBecomeAttributes) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("opset18_forms.onnx")));
  auto attrs = [&](llvm::StringRef name) -> const Attrs & {
    const Node *n = findByName(*m, name);
    EXPECT_NE(n, nullptr) << name.str();
    static const Attrs none;
    return n ? n->attrs() : none;
  };
  EXPECT_EQ(attrs("stats/ReduceMean").getInts("axes"), (Ints{2, 3}));
  EXPECT_EQ(attrs("stats/ReduceMean").getInt("keepdims"), 1);
  EXPECT_EQ(attrs("stats/ReduceSum").getInts("axes"), (Ints{1}));
  EXPECT_EQ(attrs("stats/ReduceSum").getInt("keepdims"), 0);
  EXPECT_EQ(attrs("stats/Unsqueeze").getInts("axes"), (Ints{1}));
  EXPECT_EQ(attrs("stats/Squeeze").getInts("axes"), (Ints{1}));
  EXPECT_EQ(attrs("clip/Clip").getFloat("min"), -1.0);
  EXPECT_EQ(attrs("clip/Clip").getFloat("max"), 2.0);
  EXPECT_TRUE(std::isinf(attrs("clip/Clip_max").getFloat("min")));
  EXPECT_EQ(attrs("pad/Pad").getInts("pads"), (Ints{0, 0, 1, 0, 0, 0, 2, 1}));
  EXPECT_FLOAT_EQ((float)attrs("pad/Pad").getFloat("value"), 0.25f);
  EXPECT_EQ(attrs("split/Split").getInts("split"), (Ints{5, 4}));
  EXPECT_EQ(attrs("slice/Slice").getInts("steps"), (Ints{-2}));
  EXPECT_EQ(attrs("drop/Dropout").getFloat("ratio"), 0.3);
  EXPECT_FALSE(attrs("drop/Dropout").has("training"));
  // Pad makes [N,4,9,7], Split [N,4,5,7], Slice from the end by -2 [N,4,5,4].
  EXPECT_EQ(attrs("shape/Reshape").getInts("shape"), (Ints{kBatchDim, 80}));
  EXPECT_EQ(attrs("head/Softmax").getInt("axis"), 2);
  const Node *slice = findByName(*m, "slice/Slice");
  EXPECT_EQ(slice->result()->type(), TensorType(DType::F32, {kBatchDim, 4, 5, 4}));
  // Identity of an initializer is a weight of its own.
  const Variable *alias = m->findVariable("emb_alias");
  ASSERT_NE(alias, nullptr);
  EXPECT_EQ(alias->kind, VarKind::Param);
  EXPECT_EQ(alias->data.at(5), 5.0);
  EXPECT_EQ(m->findVariable("emb"), nullptr);
  EXPECT_EQ(findByName(*m, "emb/Sum")->op(), Op::AddN);
  EXPECT_EQ(findByName(*m, "ident/Identity")->op(), Op::Identity);
  expectRoundTrips(*m);
}

TEST(OnnxFolding, ComparisonsWhereAndModFoldOnShapesAndRunOnData) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("folding_17.onnx")));
  // Equal(N, -1) is false (N >= 1): Where keeps the shape, N included.
  EXPECT_EQ(findByName(*m, "data/Reshape")->attrs().getInts("shape"), (Ints{kBatchDim, 6}));
  // Mod([7, 6], 4) = [3, 2]; both < 4 and not > 4: Where picks them, a constant.
  const Node *picked = findByName(*m, "picked"); // a graph output keeps its name
  ASSERT_NE(picked, nullptr);
  EXPECT_EQ(picked->op(), Op::Constant);
  EXPECT_EQ(picked->attrs().getTensor("value")->at(0), 3.0);
  EXPECT_EQ(picked->attrs().getTensor("value")->at(1), 2.0);
  // On data: Less into bool, Not, Where with the scalar zero.
  EXPECT_EQ(findByName(*m, "data/Less")->result()->type(), TensorType(DType::Bool, {kBatchDim, 6}));
  EXPECT_EQ(findByName(*m, "data/Not")->op(), Op::Not);
  EXPECT_EQ(findByName(*m, "data/Where")->result()->type(), TensorType(DType::F32, {kBatchDim, 6}));
  // The constant 1, materialised for Equal on data, still folds into a shape.
  EXPECT_EQ(findByName(*m, "data/Equal")->op(), Op::Equal);
  const Node *reread = findByName(*m, "reread");
  ASSERT_NE(reread, nullptr);
  EXPECT_EQ(reread->op(), Op::Constant);
  EXPECT_EQ(*reread->attrs().getTensor("value"), Tensor::fromInts({2}, {1, 1}));
  // The dynamo exporter's zero bias: the shape [6] folded, CastLike of the
  // constant 0 folded into f32, then expanded at run time; CastLike on data
  // is a Cast to the other input's element type.
  const Node *bias = findByName(*m, "dyn/Expand_bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->op(), Op::Expand);
  EXPECT_EQ(bias->result()->type(), TensorType(DType::F32, {6}));
  const Node *zero = bias->operand(0)->producer();
  ASSERT_EQ(zero->op(), Op::Constant);
  EXPECT_EQ(*zero->attrs().getTensor("value"), Tensor::scalar(0.0f));
  const Node *cast = findByName(*m, "dyn/CastLike_data");
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(cast->op(), Op::Cast);
  EXPECT_EQ(cast->result()->type(), TensorType(DType::I64, {kBatchDim, 6}));
  expectRoundTrips(*m);
}

TEST(OnnxFolding, OneElementConstantInitializersAreNotParameters) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("epsilon_17.onnx")));
  for (const char *constant : {"eps", "val_12", "fill"})
    EXPECT_EQ(m->findVariable(constant), nullptr) << constant;
  for (const char *param : {"scale", "head.bias"})
    EXPECT_NE(m->findVariable(param), nullptr) << param;
  const Node *add = findByName(*m, "bn/batchnorm/add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->operand(1)->producer()->op(), Op::Constant);
  expectRoundTrips(*m);
}

//===-- The ops of modern models ---------------------------------------------===//

class OnnxModernOps : public ::testing::TestWithParam<const char *> {};

TEST_P(OnnxModernOps, LayerNormGeluAndHardActivationsImport) {
  std::string file = std::string("modern_") + GetParam() + "_17.onnx";
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath(file)));
  llvm::StringSet<> ops = opsOf(*m);
  for (const char *op : {"LayerNorm", "Erf", "Tanh", "HardSwish", "HardSigmoid", "Conv", "Gemm"})
    EXPECT_TRUE(ops.contains(op)) << "no " << op << " in " << file;
  // PyTorch 1.13 writes GELU in older ops; nothing fuses them back.
  EXPECT_FALSE(ops.contains("Gelu"));
  const Node *norm = findByName(*m, "norm/LayerNormalization");
  const Node *norm2d = findByName(*m, "norm2d/LayerNormalization");
  ASSERT_TRUE(norm && norm2d);
  EXPECT_EQ(norm->attrs().getInt("axis"), 1);
  EXPECT_EQ(norm2d->attrs().getInt("axis"), 1) << "-2 of [N, 4, 6], made non-negative";
  EXPECT_EQ(norm->attrs().getFloat("epsilon"), 1e-5);
  EXPECT_EQ(norm2d->operand(1)->type(), TensorType(DType::F32, {4, 6}));
  for (const char *name : {"norm.weight", "norm.bias", "norm2d.weight", "norm2d.bias"}) {
    const Variable *v = m->findVariable(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->kind, VarKind::Param) << name;
  }
  const Node *hs = firstNode(*m, Op::HardSigmoid);
  EXPECT_FLOAT_EQ((float)hs->attrs().getFloat("alpha"), 1.0f / 6);
  EXPECT_EQ(hs->attrs().getFloat("beta"), 0.5);
  EXPECT_EQ(m->plan().onnxOpset, std::optional<int64_t>(17));
  expectRoundTrips(*m);
}

INSTANTIATE_TEST_SUITE_P(Frontend, OnnxModernOps, ::testing::Values("eval", "train"));

TEST(OnnxModernOps, ComputesPyTorchsForwardPass) {
  ImportOptions two;
  two.batch = 2;
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("modern_eval_17.onnx"), two));
  auto x = readNpy(modelPath("modern_x.npy"));
  auto want = readNpy(modelPath("modern_y.npy"));
  ASSERT_TRUE(x && want);
  TensorVariables vars;
  for (const Variable &v : m->variables())
    vars.tensors[v.name] = v.data.clone();
  auto out = runGraph(m->main(), {{"x", *x}}, vars);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  double top = 0, worst = 0;
  for (int64_t i = 0; i < want->numElements(); ++i) {
    top = std::max(top, std::abs(want->at(i)));
    worst = std::max(worst, std::abs((*out)[0].at(i) - want->at(i)));
  }
  // The longest sum is fc's 64 terms: 2(K + 4)u is 8e-6.
  EXPECT_LE(worst, 8e-6 * top);
}

TEST(OnnxModernOps, GraphOnlyLayerNormWeightsAreOnesAndZeros) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("modern_graph_only_17.onnx")));
  for (const char *name : {"norm.weight", "norm2d.weight"})
    EXPECT_EQ(m->findVariable(name)->init, (Initializer{"ones", {}})) << name;
  for (const char *name : {"norm.bias", "norm2d.bias"})
    EXPECT_EQ(m->findVariable(name)->init, (Initializer{"zeros", {}})) << name;
  EXPECT_EQ(m->findVariable("norm.weight")->kind, VarKind::Param);
}

TEST(OnnxModernOps, Opset20GeluIsOneOpAndExportsAsOne) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("gelu_20.onnx")));
  const Node *erf = findByName(*m, "act/Gelu"), *tanh = findByName(*m, "act2/Gelu");
  ASSERT_TRUE(erf && tanh);
  EXPECT_EQ(erf->op(), Op::Gelu);
  EXPECT_FALSE(erf->attrs().has("approximate"));
  EXPECT_EQ(tanh->attrs().getString("approximate"), "tanh");
  EXPECT_EQ(m->plan().onnxOpset, std::optional<int64_t>(20));
  // Written back at opset 20 with its Gelus (Debian's ONNX 1.12 checker knows
  // opsets up to 17 only, so the file is checked by importing it).
  auto bytes = exportOnnxBytes(*m, 0, ExportForm::Training);
  ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(*bytes));
  EXPECT_EQ(proto.opset_import(0).version(), 20);
  int gelus = 0;
  for (const auto &n : proto.graph().node())
    gelus += n.op_type() == "Gelu";
  EXPECT_EQ(gelus, 2);
  auto back = importOnnxBytes(*bytes);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  std::string why;
  EXPECT_TRUE(structurallyEqual(*m, **back, &why)) << why;
  expectPrintParses(*m);
}

TEST(OnnxGraphOnly, WeightsGetPyTorchsDefaultInitializers) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("graph_only_13.onnx")));
  ASSERT_EQ(m->main().inputs().size(), 1u);
  auto init = [&](llvm::StringRef name) {
    const Variable *v = m->findVariable(name);
    EXPECT_NE(v, nullptr) << name.str();
    EXPECT_TRUE(!v || v->data.empty());
    return v ? v->init : Initializer{"missing", {}};
  };
  EXPECT_EQ(init("conv.weight"), (Initializer{"kaiming_uniform", {std::sqrt(5.0)}}));
  double convBound = 1 / std::sqrt(27.0), fcBound = 1 / std::sqrt(144.0);
  EXPECT_EQ(init("conv.bias"), (Initializer{"uniform", {-convBound, convBound}}));
  EXPECT_EQ(init("bn.weight"), (Initializer{"ones", {}}));
  EXPECT_EQ(init("bn.bias"), (Initializer{"zeros", {}}));
  EXPECT_EQ(init("bn.running_mean"), (Initializer{"zeros", {}}));
  EXPECT_EQ(init("bn.running_var"), (Initializer{"ones", {}}));
  EXPECT_EQ(init("fc.weight"), (Initializer{"kaiming_uniform", {std::sqrt(5.0)}}));
  EXPECT_EQ(init("fc.bias"), (Initializer{"uniform", {-fcBound, fcBound}}));
  EXPECT_EQ(m->findVariable("bn.running_var")->kind, VarKind::State);
  EXPECT_EQ(m->findVariable("fc.bias")->kind, VarKind::Param);

  // Print/parse keeps the initializers; export materialises them.
  expectPrintParses(*m);
  expectExportImports(*materialised(*m, 0));
  auto bytes = exportOnnxBytes(*m, 7, ExportForm::Training);
  ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
  EXPECT_EQ(onnxCheckerError(*bytes), "");
  auto back = importOnnxBytes(*bytes);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  std::string why;
  EXPECT_TRUE(structurallyEqual(*materialised(*m, 7), **back, &why)) << why;
}

TEST(OnnxGraphOnly, StrippedInitializersAreSeeded) {
  ImportOptions opts;
  opts.seed = 42;
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("stripped_weights_13.onnx"), opts));
  EXPECT_EQ(m->plan().seed, 42);
  const Variable *w = m->findVariable("fc.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->init, (Initializer{"kaiming_uniform", {std::sqrt(5.0)}}));
  double bound = 1 / std::sqrt(10.0);
  EXPECT_EQ(m->findVariable("fc.bias")->init, (Initializer{"uniform", {-bound, bound}}));
  auto value = initialValue(*w, 42);
  ASSERT_TRUE(bool(value));
  for (int64_t i = 0; i < value->numElements(); ++i)
    EXPECT_LE(std::abs(value->at(i)), bound + 1e-7);
  expectPrintParses(*m);
  expectExportImports(*materialised(*m, 0));
}

TEST(OnnxFixedBatch, KeepsItsOwnBatch) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("mlp_static_13.onnx")));
  EXPECT_EQ(m->main().inputs()[0]->result()->type(), TensorType(DType::F32, {4, 12}));
  EXPECT_EQ(m->batch(), std::optional<int64_t>(4));
  const Node *clip = firstNode(*m, Op::Clip);
  ASSERT_NE(clip, nullptr);
  EXPECT_EQ(clip->attrs().getFloat("min"), 0.0);
  EXPECT_EQ(clip->attrs().getFloat("max"), 6.0);
  // Another batch asked for: the module keeps its own (rebatching is the
  // caller's, passes/Rebatch.h).
  ImportOptions eight;
  eight.batch = 8;
  ASSERT_OK_AND_ASSIGN(bound, importOnnxFile(modelPath("mlp_static_13.onnx"), eight));
  EXPECT_EQ(bound->batch(), std::optional<int64_t>(4));
  EXPECT_EQ(bound->main().inputs()[0]->result()->type(), TensorType(DType::F32, {4, 12}));
  expectRoundTrips(*m);
}

TEST(OnnxFixedBatch, AnUnnamedDynamicAxisZeroIsTheBatch) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("unnamed_batch_13.onnx")));
  EXPECT_EQ(m->main().inputs()[0]->result()->type(), TensorType(DType::F32, {kBatchDim, 4}));
  expectRoundTrips(*m);
}

TEST(OnnxMlp, WeightsEqualStateDict) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("mlp_13.onnx")));
  auto t = readNpy(modelPath("mlp.fc1.weight.npy"));
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  ASSERT_NE(m->findVariable("fc1.weight"), nullptr);
  EXPECT_EQ(m->findVariable("fc1.weight")->data, *t);
  EXPECT_EQ(m->main().outputs()[0]->name(), "y");
  EXPECT_EQ(m->main().outputs()[0]->producer()->name(), "fc2/Gemm");
}

TEST(OnnxModelFile, RecognisesFormatsByContent) {
  ASSERT_OK_AND_ASSIGN(onnx, loadModelFile(modelPath("mlp_13.onnx")));
  // The same module as a module file and as text with comments, under
  // misleading extensions.
  std::string archive = tempPath("model.onnx"), text = tempPath("model.bin");
  ASSERT_FALSE(bool(writeModuleFile(archive, *onnx)));
  {
    std::ofstream f(text);
    f << "# a comment\n  \n# another\n" << toText(*onnx, PrintOptions{true});
  }
  std::string why;
  for (const std::string &p : {archive, text}) {
    auto m = loadModelFile(p);
    ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
    EXPECT_TRUE(structurallyEqual(*onnx, **m, &why)) << p << ": " << why;
  }
  ImportOptions opts;
  opts.batch = 3;
  auto bound = loadModelFile(text, opts);
  ASSERT_TRUE(bool(bound)) << llvm::toString(bound.takeError());
  EXPECT_EQ((*bound)->batch(), 3);

  for (const char *bad : {"text.onnx", "empty.onnx"}) {
    auto m = loadModelFile(modelPath(bad));
    ASSERT_FALSE(bool(m));
    std::string err = llvm::toString(m.takeError());
    EXPECT_NE(err.find(bad), std::string::npos) << err;
    EXPECT_TRUE(err.find("not a model graphc can read") != std::string::npos ||
                err.find("is empty") != std::string::npos)
        << err;
  }
  llvm::sys::fs::remove(archive);
  llvm::sys::fs::remove(text);
}

} // namespace
