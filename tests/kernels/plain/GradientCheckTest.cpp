// Gradient kernels against central finite differences of their forward kernels:
// for L(x) = sum(dy * F(x)), dL/dx_i ~ (L(x + h e_i) - L(x - h e_i)) / 2h.
#include "PlainTestUtil.h"

#include <cmath>

using namespace graphc;

namespace {

constexpr double kStep = 1e-2;

/// sum(dy * y) in double.
double dot(const Tensor &dy, const Tensor &y) {
  double s = 0;
  for (int64_t i = 0; i < y.numElements(); ++i)
    s += dy.at(i) * y.at(i);
  return s;
}

/// Compares grad with finite differences of `loss` at x, element by element.
template <typename Loss>
void expectFiniteDifferences(const Tensor &x, const Tensor &grad, Loss loss) {
  ASSERT_EQ(x.numElements(), grad.numElements());
  for (int64_t i = 0; i < x.numElements(); ++i) {
    Tensor plus = x.clone(), minus = x.clone();
    plus.data<float>()[i] += (float)kStep;
    minus.data<float>()[i] -= (float)kStep;
    double fd = (loss(plus) - loss(minus)) / (2 * kStep);
    EXPECT_NEAR(grad.at(i), fd, 2e-3 + 1e-2 * std::abs(fd)) << "element " << i;
  }
}

struct ActivationCase {
  Op forward, gradient;
  Attrs attrs;
  Dims shape;
  bool savesOutput;         ///< the gradient reads y (else x)
  std::vector<float> kinks; ///< x values where F is not differentiable
};

void checkActivation(const ActivationCase &c) {
  Module m;
  Builder b(m.main());
  TensorType type(DType::F32, c.shape);
  Node *fwd = b.createNode(c.forward, {b.input("x", type)}, c.attrs, "forward");
  Node *grad =
      b.createNode(c.gradient, {b.input("saved", type), b.input("dy", type)}, c.attrs, "gradient");
  Tensor x = randomTensor(c.shape, 1, 2), dy = randomTensor(c.shape, 2);
  // Keep every x at least 3 steps away from a kink, where differences lie.
  for (int64_t i = 0; i < x.numElements(); ++i)
    for (float k : c.kinks)
      if (std::abs(x.data<float>()[i] - k) < 3 * kStep)
        x.data<float>()[i] = k + (x.data<float>()[i] < k ? -0.1f : 0.1f);
  auto y = mustRun(*fwd, {x});
  ASSERT_EQ(y.size(), 1u);
  auto g = mustRun(*grad, {c.savesOutput ? y[0] : x, dy});
  ASSERT_EQ(g.size(), 1u);
  expectFiniteDifferences(x, g[0],
                          [&](const Tensor &at) { return dot(dy, mustRun(*fwd, {at})[0]); });
}

Attrs attrs(std::initializer_list<std::pair<const char *, Attribute>> list) {
  Attrs a;
  for (auto &[k, v] : list)
    a.set(k, v);
  return a;
}

} // namespace

TEST(PlainGradients, ActivationsMatchFiniteDifferences) {
  checkActivation({Op::Relu, Op::ReluGrad, {}, {3, 7}, true, {0}});
  checkActivation({Op::LeakyRelu, Op::LeakyReluGrad, attrs({{"alpha", 0.2}}), {4, 5}, false, {0}});
  checkActivation({Op::Sigmoid, Op::SigmoidGrad, {}, {2, 3, 4}, true, {}});
  checkActivation({Op::Tanh, Op::TanhGrad, {}, {17}, true, {}});
  checkActivation(
      {Op::Clip, Op::ClipGrad, attrs({{"min", -0.5}, {"max", 0.5}}), {5, 6}, false, {-0.5f, 0.5f}});
}

TEST(PlainGradients, ErfGeluAndHardActivationsMatchFiniteDifferences) {
  checkActivation({Op::Erf, Op::ErfGrad, {}, {4, 6}, false, {}});
  checkActivation({Op::Gelu, Op::GeluGrad, {}, {3, 9}, false, {}});
  checkActivation(
      {Op::Gelu, Op::GeluGrad, attrs({{"approximate", std::string("tanh")}}), {3, 9}, false, {}});
  // Inputs of scale 2 reach HardSigmoid's and HardSwish's flat ends.
  checkActivation({Op::HardSigmoid,
                   Op::HardSigmoidGrad,
                   attrs({{"alpha", 0.4}, {"beta", 0.3}}),
                   {6, 7},
                   false,
                   {-0.75f, 1.75f}});
  checkActivation({Op::HardSwish, Op::HardSwishGrad, {}, {6, 7}, false, {-3.0f, 3.0f}});
}

TEST(PlainGradients, LayerNormMatchesFiniteDifferences) {
  for (int64_t axis : {1, 2, -1}) {
    Module m;
    Builder b(m.main());
    Dims shape{3, 4, 5};
    Dims normalized(shape.begin() + (axis < 0 ? axis + 3 : axis), shape.end());
    TensorType xt(DType::F32, shape), st(DType::F32, normalized);
    Attrs a = attrs({{"axis", axis}, {"epsilon", 1e-3}});
    Node *fwd = b.createNode(Op::LayerNorm, {b.input("x", xt), b.input("s", st), b.input("b", st)},
                             a, "forward");
    Node *grad = b.createNode(Op::LayerNormGrad,
                              {b.input("x2", xt), b.input("s2", st), b.input("dy", xt)}, a, "grad");
    Tensor x = randomTensor(shape, 11, 2), scale = randomTensor(normalized, 12),
           bias = randomTensor(normalized, 13), dy = randomTensor(shape, 14);
    auto g = mustRun(*grad, {x, scale, dy});
    ASSERT_EQ(g.size(), 3u);
    auto loss = [&](const Tensor &xv, const Tensor &sv, const Tensor &bv) {
      return dot(dy, mustRun(*fwd, {xv, sv, bv})[0]);
    };
    SCOPED_TRACE("axis " + std::to_string(axis));
    expectFiniteDifferences(x, g[0], [&](const Tensor &at) { return loss(at, scale, bias); });
    expectFiniteDifferences(scale, g[1], [&](const Tensor &at) { return loss(x, at, bias); });
    expectFiniteDifferences(bias, g[2], [&](const Tensor &at) { return loss(x, scale, at); });
  }
}

TEST(PlainGradients, SoftmaxFamilyMatchesFiniteDifferences) {
  checkActivation(
      {Op::Softmax, Op::SoftmaxGrad, attrs({{"axis", int64_t(1)}}), {3, 4, 5}, true, {}});
  checkActivation({Op::Softmax, Op::SoftmaxGrad, {}, {4, 6}, true, {}});
  checkActivation(
      {Op::LogSoftmax, Op::LogSoftmaxGrad, attrs({{"axis", int64_t(0)}}), {5, 3}, true, {}});
  checkActivation({Op::LogSoftmax, Op::LogSoftmaxGrad, {}, {2, 3, 6}, true, {}});
}

TEST(PlainGradients, SoftmaxCrossEntropyMatchesFiniteDifferences) {
  Module m;
  Builder b(m.main());
  TensorType logitsType(DType::F32, {4, 6});
  Value *logits = b.input("logits", logitsType);
  Value *labels = b.input("labels", TensorType(DType::I32, {4}));
  Value *dloss = b.input("dloss", TensorType(DType::F32, {}));
  Attrs a = attrs({{"scale", 0.5}});
  Node *loss = b.createNode(Op::SoftmaxCrossEntropy, {logits, labels}, a, "loss");
  Node *grad = b.createNode(Op::SoftmaxCrossEntropyGrad, {logits, labels, dloss}, a, "grad");
  Tensor x = randomTensor({4, 6}, 3, 2);
  Tensor l(TensorType(DType::I32, {4}));
  for (int i = 0; i < 4; ++i)
    l.data<int32_t>()[i] = (i * 5) % 6;
  Tensor d = Tensor::scalar(1.3f);
  auto g = mustRun(*grad, {x, l, d});
  ASSERT_EQ(g.size(), 1u);
  expectFiniteDifferences(x, g[0], [&](const Tensor &at) {
    return 1.3 * mustRun(*loss, {at, l})[0].at(0);
  });
}

TEST(PlainGradients, NllAndMseLossesMatchFiniteDifferences) {
  for (const char *kind : {"nll", "mse"}) {
    SCOPED_TRACE(kind);
    const bool mse = llvm::StringRef(kind) == "mse";
    Module m;
    Builder b(m.main());
    TensorType xt(DType::F32, {4, 6});
    Value *x = b.input("x", xt);
    Value *labels = b.input("labels", mse ? xt : TensorType(DType::I64, {4}));
    Value *dloss = b.input("dloss", TensorType(DType::F32, {}));
    Attrs a = attrs({{"scale", 0.5}});
    a.set("loss", std::string(kind));
    Node *loss = b.createNode(Op::SoftmaxCrossEntropy, {x, labels}, a, "loss");
    Node *grad = b.createNode(Op::SoftmaxCrossEntropyGrad, {x, labels, dloss}, a, "grad");
    Tensor xv = randomTensor({4, 6}, 3, 2);
    Tensor l = mse ? randomTensor({4, 6}, 4) : Tensor::fromInts({4}, {5, 0, 3, 3});
    Tensor d = Tensor::scalar(1.3f);
    auto g = mustRun(*grad, {xv, l, d});
    ASSERT_EQ(g.size(), 1u);
    expectFiniteDifferences(xv, g[0], [&](const Tensor &at) {
      return 1.3 * mustRun(*loss, {at, l})[0].at(0);
    });
  }
}

TEST(PlainGradients, GatherGradMatchesFiniteDifferences) {
  Module m;
  Builder b(m.main());
  Value *data = b.input("data", TensorType(DType::F32, {5, 4}));
  Value *indices = b.input("indices", TensorType(DType::I64, {2, 2}));
  Node *gather = b.createNode(Op::Gather, {data, indices}, attrs({{"axis", int64_t(1)}}), "gather");
  Value *dy = b.input("dy", gather->result()->type());
  Node *grad = b.createNode(Op::GatherGrad, {indices, dy},
                            attrs({{"axis", int64_t(1)}, {"data_shape", Ints{5, 4}}}), "grad");
  Tensor x = randomTensor({5, 4}, 4);
  Tensor idx = Tensor::fromInts({2, 2}, {3, 0, 3, -1}); // -1 is 3 again: three uses accumulate
  Tensor dyv = randomTensor(gather->result()->type().shape, 5);
  auto g = mustRun(*grad, {idx, dyv});
  ASSERT_EQ(g.size(), 1u);
  expectFiniteDifferences(x, g[0], [&](const Tensor &at) {
    return dot(dyv, mustRun(*gather, {at, idx})[0]);
  });
}
