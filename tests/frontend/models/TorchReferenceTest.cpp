// Our models against PyTorch: torch_reference.py (run by the ctest fixture
// models_torch_reference) dumps torchvision's state_dicts and counts each conv
// and linear layer's MACs with forward hooks; here every model must have
// exactly those variables (name, shape, kind, order; num_batches_tracked is
// not modelled), those layers in that order with those output shapes, and
// exactly those MACs per layer and in total.

#include "frontend/models/Models.h"
#include "ir/ModelSummary.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace graphc;
using namespace graphc::models;

namespace {

struct Case {
  const char *key; ///< the reference file's entry
  const char *model;
  ModelOptions options;
};

const Case kCases[] = {
    {"inception_v3", "inception_v3", {}},
    {"inception_v3_75", "inception_v3", {.imageSize = 75}},
    {"inception_v3_aux", "inception_v3", {.auxLogits = true}},
    {"resnet18", "resnet18", {}},
    {"resnet50", "resnet50", {}},
    {"small_cnn", "small_cnn", {}},
    {"small_cnn_nobn", "small_cnn_nobn", {}},
    {"mlp", "mlp", {}},
};

// Test names and messages show the reference entry, not the struct's bytes.
void PrintTo(const Case &c, std::ostream *os) {
  *os << c.key;
}

std::string shapeOf(const llvm::json::Array *dims) {
  Dims d;
  for (const llvm::json::Value &v : *dims)
    d.push_back(*v.getAsInteger());
  return shapeToString(d);
}

class TorchReference : public ::testing::TestWithParam<Case> {
protected:
  static void SetUpTestSuite() {
    auto buffer = llvm::MemoryBuffer::getFile(GRAPHC_TORCH_REFERENCE);
    if (!buffer) {
      loadError = "cannot read " + std::string(GRAPHC_TORCH_REFERENCE) +
                  "; run the tests through ctest (fixture models_torch_reference) or run "
                  "/usr/bin/python3 tests/frontend/models/torch_reference.py " +
                  GRAPHC_TORCH_REFERENCE;
      return;
    }
    auto json = llvm::json::parse((*buffer)->getBuffer());
    if (!json) {
      loadError = llvm::toString(json.takeError());
      return;
    }
    reference = std::make_unique<llvm::json::Value>(std::move(*json));
  }

  void SetUp() override {
    ASSERT_TRUE(reference) << loadError;
    const llvm::json::Object *models = reference->getAsObject()->getObject("models");
    ASSERT_TRUE(models);
    entry = models->getObject(GetParam().key);
    ASSERT_TRUE(entry) << "no reference entry " << GetParam().key;
    auto m = buildModel(GetParam().model, GetParam().options);
    ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
    module = std::move(*m);
  }

  static std::unique_ptr<llvm::json::Value> reference;
  static std::string loadError;
  const llvm::json::Object *entry = nullptr;
  std::unique_ptr<Module> module;
};

std::unique_ptr<llvm::json::Value> TorchReference::reference;
std::string TorchReference::loadError;

TEST_P(TorchReference, VariablesAreTheStateDict) {
  std::vector<std::string> ours, theirs;
  for (const Variable &v : module->variables())
    ours.push_back(v.name + " " + shapeToString(v.type.shape) + " " +
                   (v.kind == VarKind::Param ? "param" : "state"));
  for (const llvm::json::Value &e : *entry->getArray("state_dict")) {
    const llvm::json::Object *o = e.getAsObject();
    theirs.push_back(o->getString("name")->str() + " " + shapeOf(o->getArray("shape")) + " " +
                     o->getString("kind")->str());
  }
  for (const Variable &v : module->variables())
    EXPECT_EQ(v.type.dtype, DType::F32) << v.name;
  if (ours == theirs)
    return;
  // Say what differs, not just that something does.
  std::vector<std::string> a = ours, b = theirs, missing, unexpected;
  llvm::sort(a);
  llvm::sort(b);
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(missing));
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(unexpected));
  std::string report;
  for (const std::string &s : missing)
    report += "\n  missing:    " + s;
  for (const std::string &s : unexpected)
    report += "\n  unexpected: " + s;
  if (missing.empty() && unexpected.empty())
    for (size_t i = 0; i < ours.size(); ++i)
      if (ours[i] != theirs[i]) {
        report += "\n  order differs at " + std::to_string(i) + ": ours " + ours[i] +
                  ", torchvision " + theirs[i];
        break;
      }
  ADD_FAILURE() << ours.size() << " variables, torchvision has " << theirs.size() << report;
}

TEST_P(TorchReference, TrainableParameterCount) {
  EXPECT_EQ(summarize(*module).params.elements, entry->getInteger("parameters").getValueOr(-1));
}

TEST_P(TorchReference, ConvAndLinearLayersAndTheirMacs) {
  std::vector<std::string> ours, theirs;
  for (const Node *n : module->main().nodes())
    if (n->op() == Op::Conv || n->op() == Op::Gemm)
      ours.push_back(n->name());
  int64_t total = 0;
  for (const llvm::json::Value &e : *entry->getArray("layers")) {
    const llvm::json::Object *o = e.getAsObject();
    std::string name = o->getString("name")->str();
    std::replace(name.begin(), name.end(), '.', '/');
    theirs.push_back(name);
    int64_t macs = *o->getInteger("macs");
    total += macs;
    const Node *n = module->main().findNode(name);
    if (!n) {
      ADD_FAILURE() << "no node " << name;
      continue;
    }
    Dims shape(n->result()->type().shape.begin() + 1, n->result()->type().shape.end());
    EXPECT_EQ(shapeToString(shape), shapeOf(o->getArray("shape"))) << name;
    EXPECT_EQ(nodeCost(*n, 1).macs, macs) << name;
  }
  EXPECT_EQ(ours, theirs) << "the same layers in the same execution order";
  EXPECT_EQ(summarize(*module, 1).total.macs, total);
}

INSTANTIATE_TEST_SUITE_P(Models, TorchReference, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.key);
                         });

} // namespace
