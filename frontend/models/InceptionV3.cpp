//===- InceptionV3.cpp - torchvision 0.14's Inception3 ----------------------===//
//
// The topology, parameter names and initializers of torchvision's
// `inception_v3(aux_logits=..., transform_input=False, init_weights=True)`,
// written block by block as torchvision writes them (Szegedy et al.,
// "Rethinking the Inception Architecture", 2015):
//
//  - every conv is BasicConv2d: conv (no bias) → BatchNorm(eps 0.001) → ReLU;
//  - conv and linear weights are trunc_normal(0, stddev, -2, 2) with stddev
//    0.1, except AuxLogits.conv1 (0.01) and AuxLogits.fc (0.001); linear biases
//    keep nn.Linear's default, uniform(±1/sqrt(in_features)), because
//    torchvision's init loop only touches weights;
//  - the in-branch pools are F.avg_pool2d(3, 1, 1), counting padding;
//  - variables come out in state_dict order, because blocks are created in the
//    order torchvision registers its modules (AuxLogits between Mixed_6e and
//    Mixed_7a).
//
//===----------------------------------------------------------------------===//

#include "frontend/models/ModelBuilders.h"

namespace graphc::models {
namespace {

Initializer truncNormal(double stddev) {
  return {"trunc_normal", {0.0, stddev, -2.0, 2.0}};
}

class InceptionV3 {
public:
  explicit InceptionV3(NetBuilder &nb) : nb(nb) {}

  void build(const ModelOptions &o) {
    Value *x = nb.input("input", {3, o.imageSize, o.imageSize});
    x = conv(x, 32, 3, "Conv2d_1a_3x3", {.stride = 2});
    x = conv(x, 32, 3, "Conv2d_2a_3x3");
    x = conv(x, 64, 3, "Conv2d_2b_3x3", {.pad = 1});
    x = nb.maxPool(x, 3, 2, 0, "maxpool1");
    x = conv(x, 80, 1, "Conv2d_3b_1x1");
    x = conv(x, 192, 3, "Conv2d_4a_3x3");
    x = nb.maxPool(x, 3, 2, 0, "maxpool2");
    x = inceptionA(x, 32, "Mixed_5b");
    x = inceptionA(x, 64, "Mixed_5c");
    x = inceptionA(x, 64, "Mixed_5d");
    x = inceptionB(x, "Mixed_6a");
    x = inceptionC(x, 128, "Mixed_6b");
    x = inceptionC(x, 160, "Mixed_6c");
    x = inceptionC(x, 160, "Mixed_6d");
    x = inceptionC(x, 192, "Mixed_6e");
    Value *aux = o.auxLogits ? auxHead(x, o.numClasses, "AuxLogits") : nullptr;
    x = inceptionD(x, "Mixed_7a");
    x = inceptionE(x, "Mixed_7b");
    x = inceptionE(x, "Mixed_7c");
    x = nb.globalAvgPool(x, "avgpool");
    x = nb.dropout(x, o.dropout, "dropout");
    x = nb.flatten(x, "flatten");
    x = nb.linear(x, o.numClasses, {.weightInit = truncNormal(0.1)}, "fc");
    nb.output(x);
    if (aux)
      nb.output(aux);
  }

private:
  /// BasicConv2d with torchvision's weight initializer.
  Value *conv(Value *x, int64_t out, Hw kernel, llvm::StringRef name, ConvOptions opts = {},
              double stddev = 0.1) {
    opts.weightInit = truncNormal(stddev);
    return nb.basicConv(x, out, kernel, opts, name);
  }

  Value *inceptionA(Value *x, int64_t poolFeatures, llvm::StringRef name) {
    NetBuilder::Scope s(nb, name);
    Value *b1 = conv(x, 64, 1, "branch1x1");
    Value *b5 = conv(x, 48, 1, "branch5x5_1");
    b5 = conv(b5, 64, 5, "branch5x5_2", {.pad = 2});
    Value *b3 = conv(x, 64, 1, "branch3x3dbl_1");
    b3 = conv(b3, 96, 3, "branch3x3dbl_2", {.pad = 1});
    b3 = conv(b3, 96, 3, "branch3x3dbl_3", {.pad = 1});
    Value *bp = nb.avgPool(x, 3, 1, 1, "avg_pool");
    bp = conv(bp, poolFeatures, 1, "branch_pool");
    return nb.concat({b1, b5, b3, bp});
  }

  Value *inceptionB(Value *x, llvm::StringRef name) {
    NetBuilder::Scope s(nb, name);
    Value *b3 = conv(x, 384, 3, "branch3x3", {.stride = 2});
    Value *bd = conv(x, 64, 1, "branch3x3dbl_1");
    bd = conv(bd, 96, 3, "branch3x3dbl_2", {.pad = 1});
    bd = conv(bd, 96, 3, "branch3x3dbl_3", {.stride = 2});
    Value *bp = nb.maxPool(x, 3, 2, 0, "max_pool");
    return nb.concat({b3, bd, bp});
  }

  Value *inceptionC(Value *x, int64_t c7, llvm::StringRef name) {
    NetBuilder::Scope s(nb, name);
    Value *b1 = conv(x, 192, 1, "branch1x1");
    Value *b7 = conv(x, c7, 1, "branch7x7_1");
    b7 = conv(b7, c7, {1, 7}, "branch7x7_2", {.pad = {0, 3}});
    b7 = conv(b7, 192, {7, 1}, "branch7x7_3", {.pad = {3, 0}});
    Value *bd = conv(x, c7, 1, "branch7x7dbl_1");
    bd = conv(bd, c7, {7, 1}, "branch7x7dbl_2", {.pad = {3, 0}});
    bd = conv(bd, c7, {1, 7}, "branch7x7dbl_3", {.pad = {0, 3}});
    bd = conv(bd, c7, {7, 1}, "branch7x7dbl_4", {.pad = {3, 0}});
    bd = conv(bd, 192, {1, 7}, "branch7x7dbl_5", {.pad = {0, 3}});
    Value *bp = nb.avgPool(x, 3, 1, 1, "avg_pool");
    bp = conv(bp, 192, 1, "branch_pool");
    return nb.concat({b1, b7, bd, bp});
  }

  Value *inceptionD(Value *x, llvm::StringRef name) {
    NetBuilder::Scope s(nb, name);
    Value *b3 = conv(x, 192, 1, "branch3x3_1");
    b3 = conv(b3, 320, 3, "branch3x3_2", {.stride = 2});
    Value *b7 = conv(x, 192, 1, "branch7x7x3_1");
    b7 = conv(b7, 192, {1, 7}, "branch7x7x3_2", {.pad = {0, 3}});
    b7 = conv(b7, 192, {7, 1}, "branch7x7x3_3", {.pad = {3, 0}});
    b7 = conv(b7, 192, 3, "branch7x7x3_4", {.stride = 2});
    Value *bp = nb.maxPool(x, 3, 2, 0, "max_pool");
    return nb.concat({b3, b7, bp});
  }

  Value *inceptionE(Value *x, llvm::StringRef name) {
    NetBuilder::Scope s(nb, name);
    Value *b1 = conv(x, 320, 1, "branch1x1");
    Value *b3 = conv(x, 384, 1, "branch3x3_1");
    Value *b3a = conv(b3, 384, {1, 3}, "branch3x3_2a", {.pad = {0, 1}});
    Value *b3b = conv(b3, 384, {3, 1}, "branch3x3_2b", {.pad = {1, 0}});
    b3 = nb.concat({b3a, b3b}, 1, "branch3x3");
    Value *bd = conv(x, 448, 1, "branch3x3dbl_1");
    bd = conv(bd, 384, 3, "branch3x3dbl_2", {.pad = 1});
    Value *bda = conv(bd, 384, {1, 3}, "branch3x3dbl_3a", {.pad = {0, 1}});
    Value *bdb = conv(bd, 384, {3, 1}, "branch3x3dbl_3b", {.pad = {1, 0}});
    bd = nb.concat({bda, bdb}, 1, "branch3x3dbl");
    Value *bp = nb.avgPool(x, 3, 1, 1, "avg_pool");
    bp = conv(bp, 192, 1, "branch_pool");
    return nb.concat({b1, b3, bd, bp});
  }

  Value *auxHead(Value *x, int64_t numClasses, llvm::StringRef name) {
    NetBuilder::Scope s(nb, name);
    x = nb.avgPool(x, 5, 3, 0, "avg_pool");
    x = conv(x, 128, 1, "conv0");
    x = conv(x, 768, 5, "conv1", {}, 0.01);
    x = nb.globalAvgPool(x, "adaptive_avg_pool");
    x = nb.flatten(x);
    return nb.linear(x, numClasses, {.weightInit = truncNormal(0.001)}, "fc");
  }

  NetBuilder &nb;
};

} // namespace

void buildInceptionV3(NetBuilder &nb, const ModelOptions &o) {
  InceptionV3(nb).build(o);
}

} // namespace graphc::models
