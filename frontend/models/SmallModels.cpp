//===- SmallModels.cpp - small_cnn, small_cnn_nobn, mlp ---------------------===//
//
// Models small enough to train on a CPU in seconds (Fashion-MNIST: 28×28 grey
// images, 10 classes), with PyTorch's default initializers so a PyTorch twin
// with the same module names (docs/models.md) matches them variable for
// variable:
//
//   small_cnn:  conv1 32 3×3 pad 1 → bn1 → ReLU → maxpool 2 →
//               conv2 64 3×3 pad 1 → bn2 → ReLU → maxpool 2 →
//               flatten → fc1 128 → ReLU → dropout 0.5 → fc2 classes
//   small_cnn_nobn: the same without bn1/bn2; its convs carry a bias instead
//               (with BatchNorm the bias would be redundant, so there is none).
//   mlp:        flatten input [N, size²] → fc1 → ReLU → ... → fcK classes
//
//===----------------------------------------------------------------------===//

#include "frontend/models/ModelBuilders.h"

namespace graphc::models {
namespace {

void buildCnn(NetBuilder &nb, const ModelOptions &o, bool batchNorm) {
  Value *x = nb.input("input", {1, o.imageSize, o.imageSize});
  auto convBlock = [&](Value *v, int64_t channels, int index) {
    std::string i = std::to_string(index);
    v = nb.conv2d(v, channels, 3, {.pad = 1, .bias = !batchNorm}, "conv" + i);
    if (batchNorm)
      v = nb.batchNorm(v, {}, "bn" + i);
    v = nb.relu(v, "relu" + i);
    return nb.maxPool(v, 2, 2, 0, "pool" + i);
  };
  x = convBlock(x, 32, 1);
  x = convBlock(x, 64, 2);
  x = nb.flatten(x);
  x = nb.linear(x, 128, {}, "fc1");
  x = nb.relu(x, "relu3");
  x = nb.dropout(x, o.dropout);
  x = nb.linear(x, o.numClasses, {}, "fc2");
  nb.output(x);
}

} // namespace

void buildSmallCnn(NetBuilder &nb, const ModelOptions &o) {
  buildCnn(nb, o, true);
}

void buildSmallCnnNoBn(NetBuilder &nb, const ModelOptions &o) {
  buildCnn(nb, o, false);
}

void buildMlp(NetBuilder &nb, const ModelOptions &o) {
  Value *x = nb.input("input", {o.imageSize * o.imageSize});
  int index = 1;
  for (int64_t width : o.hiddenSizes) {
    std::string i = std::to_string(index++);
    x = nb.linear(x, width, {}, "fc" + i);
    x = nb.relu(x, "relu" + i);
  }
  x = nb.linear(x, o.numClasses, {}, "fc" + std::to_string(index));
  nb.output(x);
}

} // namespace graphc::models
