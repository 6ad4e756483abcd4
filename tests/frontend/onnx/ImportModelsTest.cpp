//===- ImportModelsTest.cpp - torchvision models exported by PyTorch 1.13 --===//
//
// inception_v3 and resnet18 in eval and training mode at opsets 13 and 17:
// each imports, verifies, prints and parses back, exports and imports back
// equal; parameter and statistic counts match PyTorch's; weights equal the
// state_dict tensors make_models.py saved; the batch binds.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "frontend/onnx/OnnxExporter.h"

#include "ir/Equivalence.h"
#include "ir/Npy.h"
#include "ir/ShapeInference.h"

using namespace graphc;
using namespace graphc::testing;

namespace {

struct ModelCase {
  const char *model;
  const char *mode;
  int opset;
  int64_t inputSize;
  std::string file() const {
    return std::string(model) + "_" + mode + "_" + std::to_string(opset) + ".onnx";
  }
};

std::string caseName(const ::testing::TestParamInfo<ModelCase> &info) {
  return std::string(info.param.model) + "_" + info.param.mode + "_" +
         std::to_string(info.param.opset);
}

void PrintTo(const ModelCase &c, std::ostream *os) {
  *os << c.file();
}

class OnnxTorchvisionModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(OnnxTorchvisionModel, ImportsVerifiesAndRoundTrips) {
  const ModelCase &c = GetParam();
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath(c.file())));
  std::vector<Node *> inputs = m->main().inputs();
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0]->name(), "x");
  EXPECT_EQ(inputs[0]->result()->type(),
            TensorType(DType::F32, {kBatchDim, 3, c.inputSize, c.inputSize}));
  ASSERT_EQ(m->main().outputs().size(), 1u);
  EXPECT_EQ(m->main().outputs()[0]->name(), "logits");
  EXPECT_EQ(m->main().outputs()[0]->type(), TensorType(DType::F32, {kBatchDim, 1000}));
  for (const Node *n : m->main().nodes())
    EXPECT_FALSE(llvm::StringRef(n->name()).startswith("/")) << n->name();
  // Printing 95 MB of inception weights as hex takes seconds: once is enough.
  expectRoundTrips(*m, /*weights=*/std::string(c.model) == "resnet18" ||
                           c.file() == "inception_v3_train_17.onnx");
}

INSTANTIATE_TEST_SUITE_P(Frontend, OnnxTorchvisionModel,
                         ::testing::Values(ModelCase{"inception_v3", "eval", 13, 299},
                                           ModelCase{"inception_v3", "eval", 17, 299},
                                           ModelCase{"inception_v3", "train", 13, 299},
                                           ModelCase{"inception_v3", "train", 17, 299},
                                           ModelCase{"resnet18", "eval", 13, 224},
                                           ModelCase{"resnet18", "eval", 17, 224},
                                           ModelCase{"resnet18", "train", 13, 224},
                                           ModelCase{"resnet18", "train", 17, 224}),
                         caseName);

void expectEqualsNpy(const Module &m, llvm::StringRef var, llvm::StringRef npy) {
  const Variable *v = m.findVariable(var);
  ASSERT_NE(v, nullptr) << var.str();
  auto t = readNpy(modelPath(npy));
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  EXPECT_EQ(v->data, *t) << var.str() << " differs from PyTorch's state_dict";
}

TEST(OnnxInceptionV3, TrainingExportHasPyTorchsParametersAndStatistics) {
  for (int opset : {13, 17}) {
    SCOPED_TRACE(opset);
    ASSERT_OK_AND_ASSIGN(
        m, importOnnxFile(modelPath("inception_v3_train_" + std::to_string(opset) + ".onnx")));
    EXPECT_EQ(countElements(*m, VarKind::Param), 23834568);
    EXPECT_EQ(countElements(*m, VarKind::State), 34432);
    unsigned batchNorms = 0, dropouts = 0;
    for (const Node *n : m->main().nodes()) {
      if (n->op() == Op::BatchNorm) {
        ++batchNorms;
        EXPECT_EQ(n->attrs().getInt("training"), 1) << n->name();
        // ONNX's float32 attributes read as the decimals PyTorch wrote.
        EXPECT_EQ(n->attrs().getFloat("momentum"), 0.9);
        EXPECT_EQ(n->attrs().getFloat("epsilon"), 0.001);
        for (unsigned i : {3u, 4u}) {
          const Node *read = n->operand(i)->producer();
          ASSERT_EQ(read->op(), Op::Variable);
          EXPECT_EQ(m->findVariable(read->attrs().getString("var"))->kind, VarKind::State);
        }
      }
      if (n->op() == Op::Dropout) {
        ++dropouts;
        EXPECT_EQ(n->attrs().getFloat("ratio"), 0.5);
        EXPECT_EQ(n->attrs().getInt("training"), 1);
        EXPECT_EQ(n->name(), "dropout/Dropout");
      }
    }
    EXPECT_EQ(batchNorms, 94u);
    EXPECT_EQ(dropouts, 1u);
    EXPECT_NE(m->main().findNode("Mixed_5b/branch1x1/conv/Conv"), nullptr);
    EXPECT_NE(m->main().findNode("Mixed_7c/branch3x3dbl_3b/bn/BatchNormalization"), nullptr);
    expectEqualsNpy(*m, "Mixed_6e.branch7x7_2.conv.weight",
                    "inception_v3.Mixed_6e.branch7x7_2.conv.weight.npy");
    expectEqualsNpy(*m, "fc.bias", "inception_v3.fc.bias.npy");
  }
}

TEST(OnnxInceptionV3, EvalExportFoldsBatchNormAndKeepsOneBiasPerConv) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("inception_v3_eval_17.onnx")));
  // PyTorch folds BN into the convolutions (one bias each instead of BN's
  // scale and bias) and shares equal folded biases through Identity nodes,
  // which the importer undoes.
  EXPECT_EQ(countElements(*m, VarKind::Param), 23834568 - 17216);
  EXPECT_EQ(countElements(*m, VarKind::State), 0);
  unsigned convs = 0;
  for (const Node *n : m->main().nodes()) {
    EXPECT_NE(n->op(), Op::BatchNorm);
    EXPECT_NE(n->op(), Op::Identity);
    if (n->op() == Op::Conv) {
      ++convs;
      EXPECT_EQ(n->numOperands(), 3u) << n->name();
    }
  }
  EXPECT_EQ(convs, 94u);
  expectEqualsNpy(*m, "fc.bias", "inception_v3.fc.bias.npy");
}

TEST(OnnxResNet18, ParametersStatisticsAndWeights) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("resnet18_train_13.onnx")));
  EXPECT_EQ(countElements(*m, VarKind::Param), 11689512);
  EXPECT_EQ(countElements(*m, VarKind::State), 2 * 4800);
  expectEqualsNpy(*m, "layer3.1.conv2.weight", "resnet18.layer3.1.conv2.weight.npy");
  ASSERT_OK_AND_ASSIGN(e, importOnnxFile(modelPath("resnet18_eval_13.onnx")));
  EXPECT_EQ(countElements(*e, VarKind::Param), 11689512 - 4800);
}

TEST(OnnxInceptionV3, BatchBindsAtImportAsBindBatchDoes) {
  ImportOptions opts;
  opts.batch = 4;
  ASSERT_OK_AND_ASSIGN(bound, importOnnxFile(modelPath("inception_v3_train_17.onnx"), opts));
  EXPECT_EQ(bound->batch(), 4);
  EXPECT_EQ(bound->main().inputs()[0]->result()->type(), TensorType(DType::F32, {4, 3, 299, 299}));
  EXPECT_EQ(bound->main().outputs()[0]->type(), TensorType(DType::F32, {4, 1000}));

  ASSERT_OK_AND_ASSIGN(later, importOnnxFile(modelPath("inception_v3_train_17.onnx")));
  ASSERT_FALSE(bool(bindBatch(*later, 4)));
  std::string why;
  EXPECT_TRUE(structurallyEqual(*bound, *later, &why)) << why;

  // A bound module exports with its batch and comes back bound.
  auto bytes = exportOnnxBytes(*bound, 0, ExportForm::Training);
  ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
  auto back = importOnnxBytes(*bytes);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_TRUE(structurallyEqual(*bound, **back, &why)) << why;
}

} // namespace
