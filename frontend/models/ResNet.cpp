//===- ResNet.cpp - torchvision's ResNet-18 and ResNet-50 ------------------===//
//
// He et al., "Deep Residual Learning", 2015, as torchvision 0.14 builds it
// (ResNet v1.5: a Bottleneck strides in its 3×3 conv). Names follow the
// state_dict (`layer2.0.downsample.0.weight`); convs have no bias and are
// kaiming_normal(fan_out, relu); BatchNorm is eps 1e-5, PyTorch momentum 0.1;
// fc keeps nn.Linear's defaults. A block computes its downsample branch after
// its main path, as torchvision does, so variables come out in state_dict order.
//
//===----------------------------------------------------------------------===//

#include "frontend/models/ModelBuilders.h"

#include <cmath>

namespace graphc::models {
namespace {

class ResNet {
public:
  ResNet(NetBuilder &nb, bool bottleneck) : nb(nb), bottleneck(bottleneck) {}

  void build(const ModelOptions &o, llvm::ArrayRef<int> blocks) {
    Value *x = nb.input("input", {3, o.imageSize, o.imageSize});
    x = conv(x, 64, 7, "conv1", {.stride = 2, .pad = 3});
    x = nb.batchNorm(x, {}, "bn1");
    x = nb.relu(x);
    x = nb.maxPool(x, 3, 2, 1, "maxpool");
    x = layer(x, 64, blocks[0], 1, "layer1");
    x = layer(x, 128, blocks[1], 2, "layer2");
    x = layer(x, 256, blocks[2], 2, "layer3");
    x = layer(x, 512, blocks[3], 2, "layer4");
    x = nb.globalAvgPool(x, "avgpool");
    x = nb.flatten(x);
    x = nb.linear(x, o.numClasses, {}, "fc");
    nb.output(x);
  }

private:
  int64_t expansion() const { return bottleneck ? 4 : 1; }

  Value *conv(Value *x, int64_t out, Hw kernel, llvm::StringRef name, ConvOptions opts = {}) {
    opts.bias = false;
    opts.weightInit = Initializer{"kaiming_normal", {std::sqrt(2.0), 1}}; // fan_out, relu gain
    return nb.conv2d(x, out, kernel, opts, name);
  }

  Value *layer(Value *x, int64_t planes, int count, int64_t stride, llvm::StringRef name) {
    NetBuilder::Scope s(nb, name);
    for (int i = 0; i < count; ++i) {
      bool downsample = i == 0 && (stride != 1 || inplanes != planes * expansion());
      std::string index = std::to_string(i);
      x = bottleneck ? bottleneckBlock(x, planes, i == 0 ? stride : 1, downsample, index)
                     : basicBlock(x, planes, i == 0 ? stride : 1, downsample, index);
      inplanes = planes * expansion();
    }
    return x;
  }

  Value *shortcut(Value *x, int64_t planes, int64_t stride, bool downsample) {
    if (!downsample)
      return x;
    NetBuilder::Scope s(nb, "downsample");
    x = conv(x, planes * expansion(), 1, "0", {.stride = stride});
    return nb.batchNorm(x, {}, "1");
  }

  Value *basicBlock(Value *x, int64_t planes, int64_t stride, bool downsample,
                    llvm::StringRef name) {
    NetBuilder::Scope s(nb, name);
    Value *out = conv(x, planes, 3, "conv1", {.stride = stride, .pad = 1});
    out = nb.relu(nb.batchNorm(out, {}, "bn1"));
    out = conv(out, planes, 3, "conv2", {.pad = 1});
    out = nb.batchNorm(out, {}, "bn2");
    out = nb.add(out, shortcut(x, planes, stride, downsample));
    return nb.relu(out);
  }

  Value *bottleneckBlock(Value *x, int64_t planes, int64_t stride, bool downsample,
                         llvm::StringRef name) {
    NetBuilder::Scope s(nb, name);
    Value *out = conv(x, planes, 1, "conv1");
    out = nb.relu(nb.batchNorm(out, {}, "bn1"));
    out = conv(out, planes, 3, "conv2", {.stride = stride, .pad = 1});
    out = nb.relu(nb.batchNorm(out, {}, "bn2"));
    out = conv(out, planes * expansion(), 1, "conv3");
    out = nb.batchNorm(out, {}, "bn3");
    out = nb.add(out, shortcut(x, planes, stride, downsample));
    return nb.relu(out);
  }

  NetBuilder &nb;
  bool bottleneck;
  int64_t inplanes = 64;
};

} // namespace

void buildResNet18(NetBuilder &nb, const ModelOptions &o) {
  ResNet(nb, /*bottleneck=*/false).build(o, {2, 2, 2, 2});
}

void buildResNet50(NetBuilder &nb, const ModelOptions &o) {
  ResNet(nb, /*bottleneck=*/true).build(o, {3, 4, 6, 3});
}

} // namespace graphc::models
