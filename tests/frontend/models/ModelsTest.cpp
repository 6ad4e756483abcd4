// The model registry: every model verifies, round-trips through the text form,
// binds a batch; inception_v3's parameter counts and MACs; option errors.
// (Names, shapes and per-layer MACs against torchvision: TorchReferenceTest.)

#include "frontend/models/Models.h"
#include "ir/Equivalence.h"
#include "ir/Initializers.h"
#include "ir/ModelSummary.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/ShapeInference.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace graphc;
using namespace graphc::models;

namespace {

std::unique_ptr<Module> build(llvm::StringRef name, const ModelOptions &o = {}) {
  auto m = buildModel(name, o);
  if (!m) {
    ADD_FAILURE() << name.str() << ": " << llvm::toString(m.takeError());
    return nullptr;
  }
  return std::move(*m);
}

std::string buildError(llvm::StringRef name, const ModelOptions &o) {
  auto m = buildModel(name, o);
  if (m)
    return "built";
  return llvm::toString(m.takeError());
}

int64_t trainable(const Module &m) {
  return summarize(m).params.elements;
}

} // namespace

TEST(Models, ListHasEveryModelWithADescription) {
  std::vector<std::string> names;
  for (const ModelInfo &i : listModels()) {
    names.push_back(i.name.str());
    EXPECT_FALSE(i.description.empty()) << i.name.str();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"inception_v3", "resnet18", "resnet50", "small_cnn",
                                             "small_cnn_nobn", "mlp"}));
}

TEST(Models, UnknownNameListsTheModels) {
  std::string e = buildError("inception_v4", {});
  EXPECT_NE(e.find("unknown model 'inception_v4'"), std::string::npos) << e;
  for (const ModelInfo &i : listModels())
    EXPECT_NE(e.find(i.name.str()), std::string::npos) << e;
}

// Verify, print, parse back equal, bind a batch, verify again.
TEST(Models, EveryModelVerifiesRoundTripsAndBinds) {
  for (const ModelInfo &info : listModels()) {
    SCOPED_TRACE(info.name.str());
    auto m = build(info.name);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->name(), info.name.str());
    ASSERT_FALSE(bool(verify(*m)));
    EXPECT_FALSE(m->batch().has_value());
    for (Node *in : m->main().inputs())
      EXPECT_EQ(in->result()->type().shape[0], kBatchDim) << "the batch stays symbolic";
    for (const Variable &v : m->variables())
      EXPECT_FALSE(bool(checkInitializer(v))) << v.name;

    std::string text = toText(*m);
    auto back = parseModule(text, info.name);
    ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
    std::string why;
    EXPECT_TRUE(structurallyEqual(*m, **back, &why)) << why;
    EXPECT_EQ(toText(**back), text);

    ASSERT_FALSE(bool(bindBatch(*m, 3)));
    ASSERT_FALSE(bool(verify(*m)));
    ASSERT_EQ(m->main().outputs().size(), 1u);
    int64_t classes = info.name.startswith("small") || info.name == "mlp" ? 10 : 1000;
    EXPECT_EQ(toString(m->main().outputs()[0]->type()), "f32[3," + std::to_string(classes) + "]");
  }
}

TEST(Models, InceptionV3HasTorchvisionsParameterCounts) {
  auto plain = build("inception_v3");
  auto aux = build("inception_v3", {.auxLogits = true});
  ASSERT_TRUE(plain && aux);
  EXPECT_EQ(trainable(*plain), 23834568);
  EXPECT_EQ(trainable(*aux), 27161264);
  ASSERT_EQ(aux->main().outputs().size(), 2u);
  EXPECT_EQ(aux->main().outputs()[0]->producer()->name(), "fc");
  EXPECT_EQ(aux->main().outputs()[1]->producer()->name(), "AuxLogits/fc");
  EXPECT_EQ(toString(aux->main().outputs()[1]->type()), "f32[N,1000]");
}

TEST(Models, InceptionV3Costs5Point71GigaMacsPerImage) {
  auto m = build("inception_v3");
  ASSERT_TRUE(m);
  double macs = (double)summarize(*m, 1).total.macs;
  EXPECT_NEAR(macs / 5.71e9, 1.0, 0.01) << macs;
  // Linear in the batch.
  EXPECT_EQ(summarize(*m, 8).total.macs, 8 * summarize(*m, 1).total.macs);
}

TEST(Models, InceptionV3RoundTripsWithTheAuxHeadAndBoundBatch) {
  auto m = build("inception_v3", {.auxLogits = true, .batch = 2});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->batch(), 2);
  auto back = parseModule(toText(*m));
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  std::string why;
  EXPECT_TRUE(structurallyEqual(*m, **back, &why)) << why;
}

TEST(Models, InceptionV3BuildsAt75PixelsButItsAuxHeadDoesNot) {
  auto small = build("inception_v3", {.imageSize = 75});
  ASSERT_TRUE(small);
  EXPECT_EQ(trainable(*small), 23834568);
  EXPECT_EQ(toString(small->main().findNode("Mixed_7c/concat")->result()->type()),
            "f32[N,2048,1,1]");

  // The aux head pools 5×5 windows out of Mixed_6e's 3×3 map.
  std::string e = buildError("inception_v3", {.auxLogits = true, .imageSize = 75});
  EXPECT_NE(e.find("model 'inception_v3' with 75×75 inputs and the aux head"), std::string::npos)
      << e;
  EXPECT_NE(e.find("node 'AuxLogits/avg_pool' (AveragePool)"), std::string::npos) << e;

  e = buildError("inception_v3", {.imageSize = 40});
  EXPECT_NE(e.find("40×40"), std::string::npos) << e;
}

TEST(Models, InitializersFollowTorchvision) {
  auto m = build("inception_v3", {.auxLogits = true});
  ASSERT_TRUE(m);
  auto init = [&](llvm::StringRef name) {
    const Variable *v = m->findVariable(name);
    return v ? v->init : Initializer{"<missing>", {}};
  };
  EXPECT_EQ(init("Conv2d_1a_3x3.conv.weight"), (Initializer{"trunc_normal", {0, 0.1, -2, 2}}));
  EXPECT_EQ(init("Mixed_6e.branch7x7dbl_5.conv.weight"),
            (Initializer{"trunc_normal", {0, 0.1, -2, 2}}));
  EXPECT_EQ(init("AuxLogits.conv0.conv.weight"), (Initializer{"trunc_normal", {0, 0.1, -2, 2}}));
  EXPECT_EQ(init("AuxLogits.conv1.conv.weight"), (Initializer{"trunc_normal", {0, 0.01, -2, 2}}));
  EXPECT_EQ(init("AuxLogits.fc.weight"), (Initializer{"trunc_normal", {0, 0.001, -2, 2}}));
  EXPECT_EQ(init("fc.weight"), (Initializer{"trunc_normal", {0, 0.1, -2, 2}}));
  // torchvision's init loop leaves biases to nn.Linear's default.
  double b = 1 / std::sqrt(2048.0), auxB = 1 / std::sqrt(768.0);
  EXPECT_EQ(init("fc.bias"), (Initializer{"uniform", {-b, b}}));
  EXPECT_EQ(init("AuxLogits.fc.bias"), (Initializer{"uniform", {-auxB, auxB}}));
  EXPECT_EQ(init("Mixed_7c.branch_pool.bn.weight").fn, "ones");
  EXPECT_EQ(init("Mixed_7c.branch_pool.bn.bias").fn, "zeros");
  EXPECT_EQ(m->main().findNode("dropout")->attrs().getFloat("ratio"), 0.5);

  auto r = build("resnet50");
  ASSERT_TRUE(r);
  const Variable *conv = r->findVariable("layer3.2.conv2.weight");
  const Variable *bn = r->findVariable("layer3.2.bn2.running_var");
  ASSERT_TRUE(conv && bn);
  EXPECT_EQ(conv->init, (Initializer{"kaiming_normal", {std::sqrt(2.0), 1}}))
      << "kaiming_normal_(mode='fan_out', nonlinearity='relu')";
  EXPECT_EQ(bn->kind, VarKind::State);
  EXPECT_EQ(r->main().findNode("layer3/2/bn2")->attrs().getFloat("epsilon"), 1e-5);
}

TEST(Models, OptionsShapeTheModels) {
  auto r = build("resnet18", {.numClasses = 7, .imageSize = 64, .batch = 4});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->batch(), 4);
  EXPECT_EQ(toString(r->main().inputs()[0]->result()->type()), "f32[4,3,64,64]");
  EXPECT_EQ(toString(r->main().outputs()[0]->type()), "f32[4,7]");

  auto mlp = build("mlp", {.hiddenSizes = {512, 64, 32}});
  ASSERT_TRUE(mlp);
  EXPECT_EQ(toString(mlp->findVariable("fc1.weight")->type), "f32[512,784]");
  EXPECT_EQ(toString(mlp->findVariable("fc3.weight")->type), "f32[32,64]");
  EXPECT_EQ(toString(mlp->findVariable("fc4.weight")->type), "f32[10,32]");

  auto cnn = build("small_cnn", {.dropout = 0.2});
  ASSERT_TRUE(cnn);
  EXPECT_EQ(cnn->main().findNode("dropout")->attrs().getFloat("ratio"), 0.2);
  EXPECT_EQ(trainable(*cnn), 421738);
  auto nobn = build("small_cnn_nobn");
  ASSERT_TRUE(nobn);
  EXPECT_EQ(trainable(*nobn), 421642);
  for (const Node *n : nobn->main().nodes())
    EXPECT_NE(n->op(), Op::BatchNorm) << n->name();
}

TEST(Models, BadOptionsSayWhatIsWrong) {
  EXPECT_NE(buildError("resnet18", {.numClasses = -3}).find("number of classes must be positive"),
            std::string::npos);
  EXPECT_NE(buildError("resnet18", {.auxLogits = true}).find("model 'resnet18' has no auxiliary"),
            std::string::npos);
  EXPECT_NE(buildError("small_cnn", {.dropout = 1.5}).find("dropout ratio must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(buildError("mlp", {.hiddenSizes = {16, 0}}).find("hidden sizes must be positive"),
            std::string::npos);
  EXPECT_NE(buildError("mlp", {.imageSize = -28}).find("image size must be positive"),
            std::string::npos);
  EXPECT_NE(buildError("mlp", {.batch = -1}).find("batch must be positive"), std::string::npos);
  EXPECT_NE(buildError("resnet50", {.dropout = 0.2}).find("model 'resnet50' has no dropout"),
            std::string::npos);
  EXPECT_NE(buildError("small_cnn", {.hiddenSizes = {8}}).find("takes no hidden sizes"),
            std::string::npos);
}
