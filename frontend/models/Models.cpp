//===- Models.cpp - The built-in model registry ----------------------------===//
//
// One table row per model: its name, a one-line description, its defaults and
// its builder. buildModel resolves defaults, checks the options a user can get
// wrong, builds, verifies and (when asked) binds the batch.
//
//===----------------------------------------------------------------------===//

#include "frontend/models/Models.h"

#include "frontend/models/ModelBuilders.h"
#include "ir/AttributeText.h"
#include "ir/Diagnostics.h"
#include "ir/ShapeInference.h"
#include "ir/Verifier.h"

namespace graphc::models {
namespace {

struct Entry {
  ModelInfo info;
  int64_t numClasses;
  int64_t imageSize;
  double dropout; ///< < 0: the model has no dropout
  bool hasAux;
  bool hasHidden; ///< takes ModelOptions::hiddenSizes
  void (*build)(NetBuilder &, const ModelOptions &);
};

// clang-format off
const Entry kModels[] = {
  // name, description; classes, image, dropout, aux head, hidden sizes, builder
  {{"inception_v3", "torchvision Inception v3, 299×299 RGB, optional aux head (23.8M params)"},
   1000, 299, 0.5, true, false, buildInceptionV3},
  {{"resnet18", "torchvision ResNet-18, 224×224 RGB (11.7M params)"},
   1000, 224, -1, false, false, buildResNet18},
  {{"resnet50", "torchvision ResNet-50, 224×224 RGB (25.6M params)"},
   1000, 224, -1, false, false, buildResNet50},
  {{"small_cnn", "two conv+BatchNorm blocks and two linears for 28×28 grey images (422K)"},
   10, 28, 0.5, false, false, buildSmallCnn},
  {{"small_cnn_nobn", "small_cnn without BatchNorm (convs with bias)"},
   10, 28, 0.5, false, false, buildSmallCnnNoBn},
  {{"mlp", "784 → 256 → 256 → 10 with ReLU on flattened 28×28 images"},
   10, 28, -1, false, true, buildMlp},
};
// clang-format on

std::string modelList() {
  std::string s;
  for (const Entry &e : kModels) {
    s += "\n  ";
    s += e.info.name.str();
    s.append(std::max<size_t>(16, e.info.name.size() + 2) - e.info.name.size(), ' ');
    s += e.info.description.str();
  }
  return s;
}

llvm::Error checkOptions(const Entry &e, const ModelOptions &o) {
  std::string model = "model '" + e.info.name.str() + "'";
  if (o.numClasses <= 0)
    return makeError(model + ": the number of classes must be positive, got " +
                     llvm::Twine(o.numClasses));
  if (o.imageSize <= 0)
    return makeError(model + ": the image size must be positive, got " + llvm::Twine(o.imageSize));
  if (o.batch < 0)
    return makeError(model + ": the batch must be positive (or 0 to keep it symbolic), got " +
                     llvm::Twine(o.batch));
  if (o.auxLogits && !e.hasAux)
    return makeError(model + " has no auxiliary head");
  if (e.dropout < 0 && o.dropout >= 0)
    return makeError(model + " has no dropout");
  if (!e.hasHidden && !o.hiddenSizes.empty())
    return makeError(model + " takes no hidden sizes (only mlp does)");
  if (e.dropout >= 0 && !(o.dropout >= 0 && o.dropout < 1))
    return makeError(model + ": the dropout ratio must be in [0, 1), got " +
                     formatDouble(o.dropout));
  for (int64_t h : o.hiddenSizes)
    if (h <= 0)
      return makeError(model + ": hidden sizes must be positive, got " + llvm::Twine(h));
  return llvm::Error::success();
}

} // namespace

llvm::ArrayRef<ModelInfo> listModels() {
  static const std::vector<ModelInfo> infos = [] {
    std::vector<ModelInfo> v;
    for (const Entry &e : kModels)
      v.push_back(e.info);
    return v;
  }();
  return infos;
}

llvm::Expected<std::unique_ptr<Module>> buildModel(llvm::StringRef name, const ModelOptions &opts) {
  const Entry *entry = nullptr;
  for (const Entry &e : kModels)
    if (e.info.name == name)
      entry = &e;
  if (!entry)
    return makeError("unknown model '" + name + "'; the models are:" + modelList());

  ModelOptions o = opts;
  if (o.numClasses == 0)
    o.numClasses = entry->numClasses;
  if (o.imageSize == 0)
    o.imageSize = entry->imageSize;
  if (o.dropout < 0)
    o.dropout = entry->dropout;
  if (o.hiddenSizes.empty() && entry->hasHidden)
    o.hiddenSizes = {256, 256};
  if (auto e = checkOptions(*entry, o))
    return e;

  auto m = std::make_unique<Module>(name.str());
  m->plan().source = "models";
  NetBuilder nb(*m);
  entry->build(nb, o);
  if (auto e = nb.takeError())
    return withContext(std::move(e), "model '" + name + "' with " + llvm::Twine(o.imageSize) + "×" +
                                         llvm::Twine(o.imageSize) + " inputs" +
                                         (o.auxLogits ? " and the aux head" : ""));
  if (auto e = verify(*m))
    return withContext(std::move(e), "model '" + name + "' does not verify");
  if (o.batch > 0)
    if (auto e = bindBatch(*m, o.batch))
      return e;
  return m;
}

} // namespace graphc::models
