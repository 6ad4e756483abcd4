//===- NNTwinTest.cpp - Layer CUDA kernels vs the CPU ---------------------===//
//
// Convolutions and their gradients (cuDNN), pooling, batch norm, softmax
// (cuDNN), the loss, MatMul / Gemm (cuBLAS) and reductions, in strict FP32
// (the test backend has TF32 off): relative error below 1e-5 against the
// CPU kernels on random inputs of odd shapes, empty batches included.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace graphc {
namespace {

TEST(CudaNN, ConvolutionForwardAndGradients) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(41);
  for (const ConvCase &k : convCases())
    for (bool bias : {false, true}) {
      OneNode c;
      ConvNodes n = convNodes(c, k, DType::F32, bias);
      ASSERT_TRUE(n.conv);
      std::vector<Tensor> values;
      for (Value *v : n.in)
        values.push_back(randomTensor(v->type(), rng));
      expectTwins(*n.conv, values);
      if (bias)
        continue;
      ASSERT_TRUE(n.data && n.filter);
      Tensor dy = randomTensor(n.conv->result()->type(), rng);
      expectTwins(*n.data, {dy, values[1]});
      expectTwins(*n.filter, {values[0], dy});
    }
}

TEST(CudaNN, PoolingAndItsGradients) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(42);
  for (const PoolCase &pc : poolCases())
    for (Dims shape : {Dims{2, 3, 9, 8}, Dims{4, 5, 35, 35}}) {
      Op op = pc.op;
      const Attrs &a = pc.attrs;
      OneNode c;
      TensorType xt(DType::F32, shape);
      Value *x = c.input("x", xt);
      Node *n = c.node(op, {x}, a, "pool");
      ASSERT_TRUE(n);
      Tensor xv = randomTensor(xt, rng);
      expectTwins(*n, {xv}, op == Op::MaxPool ? -1 : 1e-6);
      Tensor dy = randomTensor(n->result()->type(), rng);
      if (op == Op::MaxPool) {
        Node *g = c.node(Op::MaxPoolGrad, {x, c.input("dy", n->result()->type())}, a, "grad");
        ASSERT_TRUE(g);
        expectTwins(*g, {xv, dy});
      } else {
        Attrs ga = a;
        ga.set("input_shape", Ints(shape.begin(), shape.end()));
        Node *g = c.node(Op::AveragePoolGrad, {c.input("dy", n->result()->type())}, ga, "grad");
        ASSERT_TRUE(g);
        expectTwins(*g, {dy});
      }
    }
  for (Dims shape : {Dims{2, 3, 7, 5}, Dims{3, 4, 11}, Dims{1, 2, 3, 4, 5}, Dims{0, 3, 4, 4}}) {
    OneNode c;
    Node *n = c.node(Op::GlobalAveragePool, {c.input("x", TensorType(DType::F32, shape))});
    ASSERT_TRUE(n);
    expectTwins(*n, {randomTensor(n->operand(0)->type(), rng)});
  }
}

TEST(CudaNN, BatchNormInferenceTrainingAndGradient) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(43);
  for (Dims shape : {Dims{8, 5, 6, 7}, Dims{16, 3}, Dims{2, 1, 9, 9}, Dims{1, 4, 3, 2, 2},
                     Dims{32, 64, 17, 17}, Dims{0, 3, 4, 4}}) {
    OneNode c;
    BatchNormCase k = batchNormCase(c, shape, DType::F32, rng);
    ASSERT_TRUE(k.infer && k.train && k.trainRelu && k.grad);
    expectTwins(*k.infer, {k.x, k.scale, k.bias, k.mean, k.var});
    expectTwins(*k.train, {k.x, k.scale, k.bias});
    expectTwins(*k.trainRelu, {k.x, k.scale, k.bias});
    // The gradient at the batch's own statistics, as training uses it.
    auto stats = runNode(*k.train, {k.x, k.scale, k.bias});
    ASSERT_TRUE((bool)stats);
    expectTwins(*k.grad, {k.x, k.scale, (*stats)[1], (*stats)[2], randomTensor(k.x.type(), rng)});
  }
}

TEST(CudaNN, SoftmaxFamilyOnEveryAxis) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(44);
  for (Op op : {Op::Softmax, Op::LogSoftmax, Op::SoftmaxGrad, Op::LogSoftmaxGrad})
    for (auto [shape, axis] : {std::pair<Dims, int64_t>{{7, 10}, -1},
                               {{7, 10}, 0},
                               {{3, 5, 33}, 1},
                               {{2, 3, 4, 5}, 2},
                               {{1000, 1}, -1},
                               {{0, 4}, -1}}) {
      OneNode c;
      Attrs a;
      a.set("axis", axis);
      TensorType t(DType::F32, shape);
      bool grad = op == Op::SoftmaxGrad || op == Op::LogSoftmaxGrad;
      std::vector<Value *> in{c.input("x", t)};
      if (grad)
        in.push_back(c.input("dy", t));
      Node *n = c.node(op, in, a);
      ASSERT_TRUE(n);
      std::vector<Tensor> values{randomTensor(t, rng, -5, 5)};
      if (grad) {
        // y is the forward result, as the gradient rules feed it.
        OneNode f;
        Node *fwd =
            f.node(op == Op::SoftmaxGrad ? Op::Softmax : Op::LogSoftmax, {f.input("x", t)}, a);
        auto y = runNode(*fwd, {values[0]});
        ASSERT_TRUE((bool)y);
        values[0] = (*y)[0];
        values.push_back(randomTensor(t, rng));
      }
      expectTwins(*n, values);
    }
}

TEST(CudaNN, LayerNormAndItsGradient) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(34);
  using Case = LayerNormCase;
  for (const Case &lc :
       {Case{{8, 16}, 1, true}, Case{{4, 7, 768}, 2, true}, Case{{3, 5, 6, 7}, 2, false},
        Case{{2, 3000}, 1, true}, Case{{5000, 8}, -1, true}, Case{{0, 8}, 1, true}}) {
    OneNode c;
    LayerNormNodes n = layerNormNodes(c, lc, 1e-5);
    Node *fwd = n.forward, *grad = n.grad;
    ASSERT_TRUE(fwd && grad);
    const TensorType &xt = n.x, &st = n.scale;
    Tensor x = randomTensor(xt, rng, -3, 3), scale = randomTensor(st, rng, 0.5, 1.5);
    std::vector<Tensor> fin{x, scale};
    if (lc.bias)
      fin.push_back(randomTensor(st, rng, -1, 1));
    expectTwins(*fwd, fin);
    expectTwins(*grad, {x, scale, randomTensor(xt, rng, -1, 1)});
  }
}

TEST(CudaNN, SoftmaxCrossEntropyAndItsGradient) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(45);
  for (auto [rows, classes] :
       {std::pair<int64_t, int64_t>{8, 10}, {33, 1000}, {1, 1}, {257, 3}, {0, 5}})
    for (DType lt : {DType::I64, DType::I32})
      for (bool scaled : {false, true}) {
        OneNode c;
        Attrs a;
        if (scaled)
          a.set("scale", 0.125);
        TensorType logits(DType::F32, {rows, classes}), labels(lt, {rows});
        Value *x = c.input("x", logits), *l = c.input("labels", labels);
        Node *loss = c.node(Op::SoftmaxCrossEntropy, {x, l}, a, "loss");
        Node *grad = c.node(Op::SoftmaxCrossEntropyGrad,
                            {x, l, c.input("dloss", TensorType(DType::F32, {}))}, a, "grad");
        ASSERT_TRUE(loss && grad);
        Tensor xv = randomTensor(logits, rng, -8, 8);
        Tensor lv(labels);
        std::uniform_int_distribution<int64_t> u(0, classes - 1);
        for (int64_t b = 0; b < rows; ++b)
          lv.set(b, (double)u(rng));
        expectTwins(*loss, {xv, lv});
        expectTwins(*grad, {xv, lv, Tensor::scalar(1.5f)});
      }
}

TEST(CudaNN, BadLabelsAreReportedOnTheNextCheck) {
  SKIP_WITHOUT_CUDA();
  OneNode c;
  TensorType logits(DType::F32, {4, 10}), labels(DType::I64, {4});
  Node *loss =
      c.node(Op::SoftmaxCrossEntropy, {c.input("x", logits), c.input("l", labels)}, {}, "loss");
  ASSERT_TRUE(loss);
  std::mt19937 rng(46);
  auto gpu = runOnCuda(*loss, {randomTensor(logits, rng), Tensor::fromInts({4}, {1, 12, 3, -1})});
  ASSERT_FALSE((bool)gpu);
  std::string msg = llvm::toString(gpu.takeError());
  EXPECT_NE(msg.find("node 'loss' (SoftmaxCrossEntropy): label outside [0, 10)"), std::string::npos)
      << msg;
  EXPECT_TRUE(msg.find("value 12 at index 1") != std::string::npos ||
              msg.find("value -1 at index 3") != std::string::npos)
      << msg;
  EXPECT_NE(msg.find("2 elements in all"), std::string::npos) << msg;
  // The device keeps working.
  auto good = runOnCuda(*loss, {randomTensor(logits, rng), Tensor::fromInts({4}, {1, 2, 3, 9})});
  EXPECT_TRUE((bool)good) << llvm::toString(good.takeError());
}

TEST(CudaNN, MatMulInEveryBroadcastForm) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(47);
  const std::pair<Dims, Dims> cases[] = {{{5, 7}, {7, 3}},
                                         {{4, 5, 7}, {7, 3}},
                                         {{5, 7}, {4, 7, 3}},
                                         {{2, 3, 5, 7}, {2, 3, 7, 3}},
                                         {{2, 1, 5, 7}, {1, 3, 7, 3}},
                                         {{7}, {7, 3}},
                                         {{4, 5, 7}, {7}},
                                         {{7}, {7}},
                                         {{3, 5, 0}, {0, 4}},
                                         {{0, 5, 7}, {7, 2}},
                                         {{129, 257}, {257, 65}}};
  for (const auto &[a, b] : cases) {
    SCOPED_TRACE(shapeToString(a) + " x " + shapeToString(b));
    OneNode c;
    Node *n = c.node(Op::MatMul, {c.input("a", TensorType(DType::F32, a)),
                                  c.input("b", TensorType(DType::F32, b))});
    ASSERT_TRUE(n);
    expectTwins(
        *n, {randomTensor(n->operand(0)->type(), rng), randomTensor(n->operand(1)->type(), rng)});
  }
}

TEST(CudaNN, GemmWithTransposesScalesAndBias) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(48);
  for (int ta : {0, 1})
    for (int tb : {0, 1})
      for (Dims cShape : {Dims{}, Dims{1}, Dims{3}, Dims{5, 1}, Dims{5, 3}})
        for (auto [alpha, beta] : {std::pair<double, double>{1, 1}, {0.5, 2}, {1, 0}})
          for (int64_t k : {7, 0}) {
            OneNode c;
            Attrs a;
            a.set("transA", int64_t(ta));
            a.set("transB", int64_t(tb));
            a.set("alpha", alpha);
            a.set("beta", beta);
            Dims as = ta ? Dims{k, 5} : Dims{5, k}, bs = tb ? Dims{3, k} : Dims{k, 3};
            Node *n = c.node(Op::Gemm,
                             {c.input("a", TensorType(DType::F32, as)),
                              c.input("b", TensorType(DType::F32, bs)),
                              c.input("c", TensorType(DType::F32, cShape))},
                             a);
            ASSERT_TRUE(n);
            expectTwins(*n, {randomTensor(n->operand(0)->type(), rng),
                             randomTensor(n->operand(1)->type(), rng),
                             randomTensor(n->operand(2)->type(), rng)});
          }
}

TEST(CudaNN, ReductionsOverAnyAxes) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(49);
  const std::pair<Dims, Ints> cases[] = {{{4, 5, 6}, {1}},       {{4, 5, 6}, {0, 2}},
                                         {{4, 5, 6}, {}},        {{3, 1, 7}, {-1}},
                                         {{2, 3, 4, 5}, {1, 3}}, {{10000, 3}, {0}},
                                         {{3, 700001}, {1}},     {{2, 0, 3}, {1}},
                                         {{1 << 22}, {0}},       {{32, 64, 17, 17}, {0, 2, 3}}};
  for (Op op : {Op::ReduceSum, Op::ReduceMean})
    for (const auto &[shape, axes] : cases) {
      OneNode c;
      Attrs a;
      a.set("axes", axes);
      Node *n = c.node(op, {c.input("x", TensorType(DType::F32, shape))}, a);
      ASSERT_TRUE(n);
      expectTwins(*n, {randomTensor(n->operand(0)->type(), rng)});
    }
}

} // namespace
} // namespace graphc
