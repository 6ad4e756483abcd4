//===- ExportTest.cpp - Modules back to ONNX -------------------------------===//
//
// Exported models pass Debian's Python onnx.checker in both forms; the
// inference form normalises with the running statistics and has no Dropout,
// the training form comes back as the module it was; modules built in our own
// IR export with their names and come back; training-only ops and variables
// without values are errors naming them.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "frontend/onnx/OnnxExporter.h"

#include "ir/Builder.h"
#include "ir/Equivalence.h"
#include "ir/Initializers.h"
#include "kernels/KernelRunner.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdlib>

using namespace graphc;
using namespace graphc::testing;

namespace {

TEST(OnnxExport, PythonOnnxCheckerAcceptsExportedModels) {
  std::vector<std::string> files;
  for (const char *name :
       {"inception_v3_train_17.onnx", "inception_v3_eval_13.onnx", "resnet18_eval_13.onnx",
        "resnet18_train_17.onnx", "allops_train_11.onnx", "allops_eval_17.onnx",
        "allops_train_9.onnx", "opset18_forms.onnx", "graph_only_13.onnx",
        "stripped_weights_13.onnx", "modern_train_17.onnx", "modern_eval_17.onnx"}) {
    ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath(name)));
    for (ExportForm form : {ExportForm::Inference, ExportForm::Training}) {
      files.push_back(
          tempPath((form == ExportForm::Training ? "train-" : "infer-") + std::string(name)));
      ASSERT_FALSE(bool(exportOnnxFile(*m, files.back(), 1, form)));
    }
  }
  // The build's Python, unless GRAPHC_PYTHON names another with the onnx package (the GPU
  // bundle's runner points it at the machine's).
  const char *env = std::getenv("GRAPHC_PYTHON");
  std::string python = env && *env ? env : GRAPHC_PYTHON;
  std::vector<llvm::StringRef> args{python, ONNX_CHECK_SCRIPT};
  args.insert(args.end(), files.begin(), files.end());
  std::string log = tempPath("checker.log");
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(log),
                                                 llvm::StringRef(log)};
  std::string err;
  int rc = llvm::sys::ExecuteAndWait(python, args, llvm::None, redirects, 600, 0, &err);
  auto out = llvm::MemoryBuffer::getFile(log);
  EXPECT_EQ(rc, 0) << err << (out ? (*out)->getBuffer().str() : "");
  for (const std::string &f : files)
    llvm::sys::fs::remove(f);
  llvm::sys::fs::remove(log);
}

/// A module built in our IR (names, scopes, initializers, a bound batch).
std::unique_ptr<Module> builtModule() {
  auto m = std::make_unique<Module>("built");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 3, 8, 8}));
  Variable w;
  w.name = "stem.conv.weight";
  w.type = TensorType(DType::F32, {4, 3, 3, 3});
  w.init = {"kaiming_uniform", {std::sqrt(5.0)}};
  Value *y;
  {
    Builder::Scope s(b, "stem");
    Attrs conv;
    conv.set("strides", Ints{1, 1});
    conv.set("pads", Ints{1, 1, 1, 1});
    conv.set("dilations", Ints{1, 1});
    conv.set("group", int64_t(1));
    y = b.create(Op::Relu, {b.create(Op::Conv, {x, b.newVariable(w)}, conv, "conv")}, {}, "relu");
  }
  Attrs flat;
  flat.set("axis", int64_t(1));
  y = b.create(Op::Flatten, {y}, flat, "flatten");
  Attrs clip;
  clip.set("min", 0.0);
  clip.set("max", INFINITY);
  m->main().addOutput(b.create(Op::Clip, {y}, clip, "clip"));
  return m;
}

TEST(OnnxExport, BuiltModulesKeepTheirNames) {
  auto m = builtModule();
  auto bytes = exportOnnxBytes(*m, 5);
  ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
  EXPECT_EQ(onnxCheckerError(*bytes), "");
  ASSERT_OK_AND_ASSIGN(back, importOnnxBytes(*bytes));
  EXPECT_EQ(back->name(), "built");
  for (const char *name : {"x", "stem/conv", "stem/relu", "flatten", "clip"})
    EXPECT_NE(back->main().findNode(name), nullptr) << name;
  const Variable *w = back->findVariable("stem.conv.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data, llvm::cantFail(initialValue(*m->findVariable("stem.conv.weight"), 5)));
  const Node *clip = back->main().findNode("clip");
  EXPECT_EQ(clip->attrs().getFloat("min"), 0.0);
  EXPECT_TRUE(std::isinf(clip->attrs().getFloat("max")));
  expectRoundTrips(*back);
}

/// x -> BatchNorm (training = 1) -> Dropout -> Relu -> output.
std::unique_ptr<Module> bnDropoutModule() {
  auto m = std::make_unique<Module>("bn_dropout");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 4, 3, 3}));
  std::vector<Value *> operands{x};
  for (auto [leaf, init] : {std::pair{"weight", "ones"}, std::pair{"bias", "zeros"},
                            std::pair{"running_mean", "zeros"}, std::pair{"running_var", "ones"}}) {
    Variable v;
    v.name = std::string("bn.") + leaf;
    v.type = TensorType(DType::F32, {4});
    v.init = {init, {}};
    operands.push_back(b.newVariable(v));
  }
  Attrs bn;
  bn.set("epsilon", 1e-5);
  bn.set("momentum", 0.9);
  bn.set("training", int64_t(1));
  Value *y = b.create(Op::BatchNorm, operands, bn, "bn");
  Attrs drop;
  drop.set("ratio", 0.25);
  m->main().addOutput(b.create(Op::Relu, {b.create(Op::Dropout, {y}, drop, "drop")}, {}, "relu"));
  return m;
}

TEST(OnnxExport, InferenceFormUsesRunningStatisticsAndDropsDropout) {
  auto m = bnDropoutModule();
  ASSERT_OK_AND_ASSIGN(bytes, exportOnnxBytes(*m));
  EXPECT_EQ(onnxCheckerError(bytes), "");
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  EXPECT_NE(proto.doc_string().find("inference form"), std::string::npos) << proto.doc_string();
  std::vector<std::string> ops;
  for (const onnx::NodeProto &n : proto.graph().node()) {
    ops.push_back(n.op_type());
    if (n.op_type() != "BatchNormalization")
      continue;
    EXPECT_EQ(n.input_size(), 5); // x, scale, bias and the running statistics
    EXPECT_EQ(n.output_size(), 1);
    for (const onnx::AttributeProto &a : n.attribute())
      EXPECT_NE(a.name(), "training_mode");
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"BatchNormalization", "Relu"}));
  // Dropout is gone, not an Identity: the Relu reads the BatchNorm.
  EXPECT_EQ(proto.graph().node(1).input(0), proto.graph().node(0).output(0));

  ASSERT_OK_AND_ASSIGN(back, importOnnxBytes(bytes));
  const Node *bn = back->main().findNode("bn");
  ASSERT_NE(bn, nullptr);
  EXPECT_FALSE(bn->attrs().has("training"));
  EXPECT_EQ(back->main().findNode("drop"), nullptr);
}

TEST(OnnxExport, ADropoutThatIsAnOutputKeepsItsNameThroughAnIdentity) {
  // x -> Dropout is an output, and so is Relu(x): the inference form must
  // neither name an output after the input nor give two outputs one name.
  Module m("dropout_out");
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 4}));
  Attrs drop;
  drop.set("ratio", 0.5);
  m.main().addOutput(b.create(Op::Dropout, {x}, drop, "drop"));
  m.main().addOutput(b.create(Op::Relu, {x}, {}, "relu"));
  ASSERT_OK_AND_ASSIGN(bytes, exportOnnxBytes(m));
  EXPECT_EQ(onnxCheckerError(bytes), "");
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  ASSERT_EQ(proto.graph().node_size(), 2);
  EXPECT_EQ(proto.graph().node(0).op_type(), "Identity");
  EXPECT_EQ(proto.graph().node(0).input(0), "x");
  ASSERT_EQ(proto.graph().output_size(), 2);
  EXPECT_EQ(proto.graph().output(0).name(), proto.graph().node(0).output(0));
  EXPECT_NE(proto.graph().output(0).name(), "x");
  EXPECT_NE(proto.graph().output(0).name(), proto.graph().output(1).name());
}

TEST(OnnxExport, TrainingFormTrainsAgainAsExported) {
  auto m = bnDropoutModule();
  ASSERT_OK_AND_ASSIGN(bytes, exportOnnxBytes(*m, 3, ExportForm::Training));
  EXPECT_EQ(onnxCheckerError(bytes), "");
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  EXPECT_NE(proto.doc_string().find("training form"), std::string::npos) << proto.doc_string();
  ASSERT_OK_AND_ASSIGN(back, importOnnxBytes(bytes));
  EXPECT_EQ(back->main().findNode("bn")->attrs().getInt("training"), 1);
  EXPECT_NE(back->main().findNode("drop"), nullptr);
  expectRoundTrips(*back);
}

/// x -> Gelu -> Gelu (tanh) -> LayerNorm -> HardSigmoid -> HardSwish -> Erf.
std::unique_ptr<Module> modernOpsModule() {
  auto m = std::make_unique<Module>("modern");
  Builder b(m->main());
  Value *y = b.input("x", TensorType(DType::F32, {kBatchDim, 6}));
  Attrs tanh;
  tanh.set("approximate", std::string("tanh"));
  y = b.create(Op::Gelu, {b.create(Op::Gelu, {y}, {}, "gelu")}, tanh, "gelu_tanh");
  std::vector<Value *> norm{y};
  for (auto [name, init] : {std::pair{"norm.weight", "ones"}, std::pair{"norm.bias", "zeros"}}) {
    Variable v;
    v.name = name;
    v.type = TensorType(DType::F32, {6});
    v.data = Tensor(v.type);
    for (int64_t i = 0; i < 6; ++i)
      v.data.set(i, (std::string(init) == "ones" ? 1.0 : 0.0) + 0.1 * (double)i);
    norm.push_back(b.newVariable(v));
  }
  y = b.create(Op::LayerNorm, norm, {}, "norm");
  Attrs hard;
  hard.set("alpha", 0.25);
  hard.set("beta", 0.4);
  y = b.create(Op::HardSigmoid, {y}, hard, "hsig");
  y = b.create(Op::Erf, {b.create(Op::HardSwish, {y}, {}, "hswish")}, {}, "erf");
  m->main().addOutput(y);
  return m;
}

/// The module's output on fixed inputs at batch 3.
Tensor outputOf(const Module &m) {
  ImportOptions three;
  three.batch = 3;
  auto bytes = exportOnnxBytes(m);
  auto bound = importOnnxBytes(*bytes, three);
  EXPECT_TRUE(bool(bound));
  TensorVariables vars;
  for (const Variable &v : (*bound)->variables())
    vars.tensors[v.name] = v.data.clone();
  Tensor x(TensorType(DType::F32, {3, 6}));
  for (int64_t i = 0; i < 18; ++i)
    x.set(i, -3.0 + 0.37 * (double)i);
  auto out = runGraph((*bound)->main(), {{"x", x}}, vars);
  EXPECT_TRUE(bool(out));
  return out ? (*out)[0] : Tensor();
}

TEST(OnnxExport, GeluBelowOpset20IsWrittenInOlderOpsThatComputeTheSame) {
  auto m = modernOpsModule();
  auto bytes = exportOnnxBytes(*m);
  ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
  EXPECT_EQ(onnxCheckerError(*bytes), "");
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(*bytes));
  EXPECT_EQ(proto.opset_import(0).version(), 17);
  llvm::StringMap<int> ops;
  for (const auto &n : proto.graph().node())
    ++ops[n.op_type()];
  EXPECT_EQ(ops.count("Gelu"), 0u);
  EXPECT_EQ(ops["Erf"], 2) << "one Gelu's and the Erf";
  EXPECT_EQ(ops["Tanh"], 1);
  EXPECT_EQ(ops["LayerNormalization"], 1);
  EXPECT_EQ(ops["HardSigmoid"], 1);
  EXPECT_EQ(ops["HardSwish"], 1);
  // The output keeps its name; the module and its export compute the same.
  EXPECT_EQ(proto.graph().output(0).name(), "erf");
  Tensor decomposed = outputOf(*m);
  m->plan().onnxOpset = 20; // now Gelu is written as one op
  Tensor whole = outputOf(*m);
  ASSERT_EQ(decomposed.numElements(), 18);
  for (int64_t i = 0; i < 18; ++i)
    EXPECT_NEAR(decomposed.at(i), whole.at(i), 1e-6) << i;
}

TEST(OnnxExport, TrainingOnlyOpsAreRefused) {
  Module m("trained");
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {2, 4, 3, 3}));
  Variable scale;
  scale.name = "bn.weight";
  scale.type = TensorType(DType::F32, {4});
  scale.init = {"ones", {}};
  Variable bias = scale;
  bias.name = "bn.bias";
  Node *bn = b.createNode(Op::BatchNormTrain, {x, b.newVariable(scale), b.newVariable(bias)}, {},
                          "block/bn");
  m.main().addOutput(bn->result(0));
  auto bytes = exportOnnxBytes(m);
  ASSERT_FALSE(bool(bytes));
  std::string err = llvm::toString(bytes.takeError());
  EXPECT_NE(err.find("cannot export node 'block/bn' (BatchNormTrain)"), std::string::npos) << err;
}

TEST(OnnxExport, FusedActivationsAreRefusedNotDropped) {
  // A compiled graph's BatchNorm + ReLU (passes/InferenceFusion.h): written
  // as a plain BatchNormalization, the model would lose its ReLU.
  Module m("fused");
  Builder b(m.main());
  TensorType c(DType::F32, {4});
  Attrs a;
  a.set("activation", std::string("relu"));
  Node *bn = b.createNode(Op::BatchNorm,
                          {b.input("x", TensorType(DType::F32, {2, 4, 3, 3})), b.input("s", c),
                           b.input("b", c), b.input("m", c), b.input("v", c)},
                          a, "block/bn");
  m.main().addOutput(bn->result(0));
  auto bytes = exportOnnxBytes(m);
  ASSERT_FALSE(bool(bytes));
  std::string err = llvm::toString(bytes.takeError());
  EXPECT_NE(err.find("cannot export node 'block/bn' (BatchNorm): it carries a fused activation"),
            std::string::npos)
      << err;
}

TEST(OnnxExport, ElidedVariablesAreRefused) {
  auto m = builtModule();
  m->findVariable("stem.conv.weight")->init = {"elided", {}};
  auto bytes = exportOnnxBytes(*m);
  ASSERT_FALSE(bool(bytes));
  std::string err = llvm::toString(bytes.takeError());
  EXPECT_NE(err.find("cannot export variable 'stem.conv.weight'"), std::string::npos) << err;
}

TEST(OnnxExport, FileWriteFailsCleanly) {
  auto m = builtModule();
  llvm::Error e = exportOnnxFile(*m, "/nonexistent-dir/model.onnx");
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("/nonexistent-dir/model.onnx"), std::string::npos);
}

} // namespace
