//===- NetBuilder.h - Layers the way a model's paper names them --*- C++ -*-===//
//
// A thin layer over ir/Builder.h so that model code reads like the model's
// definition, not like pointer wiring:
//
//   NetBuilder nb(m);
//   Value *x = nb.input("input", {3, 299, 299});          // f32[N,3,299,299]
//   x = nb.basicConv(x, 32, 3, {.stride = 2}, "Conv2d_1a_3x3");
//   x = nb.maxPool(x, 3, 2);
//
// Guarantees:
//  - Two name spaces from one scope stack. Node names join scopes with '/'
//    (`Mixed_5b/branch1x1/conv`), variable names join them with '.' exactly as
//    PyTorch's state_dict does (`Mixed_5b.branch1x1.conv.weight`,
//    `...bn.running_mean`), so checkpoints and references line up by name.
//  - Parameters are VarKind::Param with PyTorch's default initializers unless a
//    layer is given others; BatchNorm running statistics are VarKind::State
//    (num_batches_tracked, a PyTorch bookkeeping buffer, is not modelled).
//  - BatchNorm is the inference form BatchNorm(x, scale, bias, mean, var) with
//    epsilon, momentum in the ONNX convention (running = running * momentum +
//    batch * (1 - momentum); PyTorch's 0.1 is 0.9 here) and training = 1, which
//    tells the training-mode pass that this layer trains (an imported, frozen
//    layer would carry training = 0).
//  - Errors are sticky: the first layer whose shapes do not fit (an image too
//    small for the network, say) records an llvm::Error naming the node, and
//    every later call returns its input unchanged without creating anything.
//    Callers check takeError() once at the end.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"

#include <optional>

namespace graphc::models {

/// A (height, width) pair that also converts from one number: `3` is 3×3.
struct Hw {
  int64_t h = 0, w = 0;
  Hw(int64_t both) : h(both), w(both) {} // NOLINT: implicit by design
  Hw(int64_t height, int64_t width) : h(height), w(width) {}
};

struct ConvOptions {
  Hw stride = 1;
  Hw pad = 0; ///< symmetric: `pad.h` rows on top and bottom
  Hw dilation = 1;
  int64_t groups = 1;
  bool bias = true; ///< nn.Conv2d's default
  /// Absent: PyTorch's defaults (kaiming_uniform(sqrt 5), bias uniform(±1/sqrt(fan_in))).
  std::optional<Initializer> weightInit, biasInit;
};

struct BatchNormOptions {
  double epsilon = 1e-5;
  double momentum = 0.9; ///< ONNX convention (PyTorch momentum 0.1)
};

struct LinearOptions {
  bool bias = true;
  /// Absent: PyTorch's defaults, as for convolutions.
  std::optional<Initializer> weightInit, biasInit;
};

/// PyTorch's default initializers for a layer with `fanIn` inputs per output.
Initializer torchDefaultWeightInit();
Initializer torchDefaultBiasInit(int64_t fanIn);

class NetBuilder {
public:
  explicit NetBuilder(Module &m) : b_(m.main()) {}
  ~NetBuilder() { llvm::consumeError(std::move(error_)); }
  NetBuilder(const NetBuilder &) = delete;
  NetBuilder &operator=(const NetBuilder &) = delete;

  Builder &builder() { return b_; }
  Module &module() { return b_.module(); }

  /// RAII: a module scope; `Scope s(nb, "Mixed_5b")` prefixes node names with
  /// `Mixed_5b/` and variable names with `Mixed_5b.`.
  class Scope {
  public:
    Scope(NetBuilder &nb, llvm::StringRef name);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    NetBuilder &nb_;
    Builder::Scope nodeScope_;
    size_t previous_;
  };

  /// A graph input of shape [N, dims...]; N stays symbolic until bindBatch.
  Value *input(llvm::StringRef name, llvm::ArrayRef<int64_t> dims, DType dtype = DType::F32);

  /// nn.Conv2d: variables `<name>.weight` [O, C/groups, kh, kw] and `<name>.bias`.
  Value *conv2d(Value *x, int64_t outChannels, Hw kernel, const ConvOptions &opts,
                llvm::StringRef name);
  /// nn.BatchNorm2d / BatchNorm1d over axis 1.
  Value *batchNorm(Value *x, const BatchNormOptions &opts, llvm::StringRef name);
  /// nn.Linear on [N, in]: Gemm(x, weight [out, in], bias) with transB = 1.
  Value *linear(Value *x, int64_t outFeatures, const LinearOptions &opts, llvm::StringRef name);

  /// Inception's BasicConv2d: conv (no bias) → BatchNorm(eps) → ReLU, inside
  /// scope `name` as `conv`, `bn`, `relu`.
  Value *basicConv(Value *x, int64_t outChannels, Hw kernel, ConvOptions opts, llvm::StringRef name,
                   double bnEpsilon = 0.001);

  Value *relu(Value *x, llvm::StringRef name = "relu");
  Value *add(Value *a, Value *b, llvm::StringRef name = "add");
  Value *maxPool(Value *x, Hw kernel, Hw stride, Hw pad = 0, llvm::StringRef name = "maxpool");
  /// F.avg_pool2d; PyTorch counts padding in the divisor by default.
  Value *avgPool(Value *x, Hw kernel, Hw stride, Hw pad = 0, llvm::StringRef name = "avgpool",
                 bool countIncludePad = true);
  /// nn.AdaptiveAvgPool2d((1, 1)).
  Value *globalAvgPool(Value *x, llvm::StringRef name = "avgpool");
  Value *concat(llvm::ArrayRef<Value *> xs, int64_t axis = 1, llvm::StringRef name = "concat");
  /// torch.flatten(x, 1).
  Value *flatten(Value *x, llvm::StringRef name = "flatten");
  Value *dropout(Value *x, double ratio, llvm::StringRef name = "dropout");

  /// Marks `v` as the next graph output.
  void output(Value *v);

  bool failed() const { return failed_; }
  /// The first error, or success; the builder can be used again afterwards.
  llvm::Error takeError();

private:
  /// `<scope>.<leaf>` in PyTorch's dotted form.
  std::string varName(llvm::StringRef leaf) const;
  Value *param(llvm::StringRef leaf, llvm::ArrayRef<int64_t> shape, Initializer init,
               VarKind kind = VarKind::Param);
  /// Creates a node, or records the error and returns nullptr.
  Value *create(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs, llvm::StringRef leaf);
  /// Records `e` unless an earlier error is already recorded.
  void fail(llvm::Error e);

  Builder b_;
  std::string varScope_;
  llvm::Error error_ = llvm::Error::success();
  bool failed_ = false;
};

} // namespace graphc::models
