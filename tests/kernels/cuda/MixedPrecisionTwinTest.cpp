//===- MixedPrecisionTwinTest.cpp - fp16 layers and loss scaling on the GPU -===//
//
// What `--precision fp16` runs on a GPU, against the CPU kernels that emulated
// GPUs use: cuDNN's f16 convolutions and their gradients (f32 accumulation)
// against f32 arithmetic on the same f16 values rounded once
// (kernels/Float16ViaF32.h); the f16 batch norms (read and written as f16 on
// the GPU, f32 arithmetic), pools and reductions (f32 kernels between a
// widening and a rounding, on both sides); CheckFinite over
// many tensors of every float type with a non-finite value planted anywhere;
// and LossScaleStep's rule over a sequence of checks, state and decisions bit
// for bit. The cases are built and run on the CPU everywhere; the GPU half
// skips ("no CUDA device") where there is none.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "ir/Module.h"

#include <cmath>

namespace graphc {
namespace {

/// Four f16 units in the last place of the largest result: cuDNN accumulates
/// in another order, and each side rounds its f32 sum to f16 once.
constexpr double kF16Tol = 4.0 / 1024;

TEST(CudaF16, ConvolutionsAndTheirGradients) {
  std::mt19937 rng(61);
  TwinCases t;
  for (const ConvCase &k : sixteenBitConvCases())
    for (bool bias : {false, true}) {
      ConvNodes n = convNodes(t.graph(), k, DType::F16, bias);
      ASSERT_TRUE(n.conv);
      std::vector<Tensor> values;
      for (Value *v : n.in)
        values.push_back(randomTensor(v->type(), rng));
      const std::string what = "x " + shapeToString(k.x) + " w " + shapeToString(k.w);
      const std::vector<Tensor> *y = t.add(n.conv, values, kF16Tol, what);
      ASSERT_TRUE(y);
      ASSERT_EQ((*y)[0].type().dtype, DType::F16);
      if (bias)
        continue;
      ASSERT_TRUE(n.data && n.filter);
      Tensor dy = randomTensor(n.conv->result()->type(), rng);
      t.add(n.data, {dy, values[1]}, kF16Tol, what);
      t.add(n.filter, {values[0], dy}, kF16Tol, what);
    }
  t.compareOnGpu();
}

TEST(CudaF16, BatchNormsPoolsAndReductions) {
  std::mt19937 rng(62);
  TwinCases t;
  for (Dims shape : {Dims{8, 5, 6, 7}, Dims{32, 64, 17, 17}, Dims{0, 3, 4, 4}}) {
    BatchNormCase k = batchNormCase(t.graph(), shape, DType::F16, rng);
    ASSERT_TRUE(k.infer && k.train && k.trainRelu && k.grad);
    t.add(k.infer, {k.x, k.scale, k.bias, k.mean, k.var}, kF16Tol);
    t.add(k.trainRelu, {k.x, k.scale, k.bias}, kF16Tol);
    const std::vector<Tensor> *train = t.add(k.train, {k.x, k.scale, k.bias}, kF16Tol);
    ASSERT_TRUE(train);
    std::vector<Tensor> stats = *train;
    ASSERT_EQ(stats.size(), 3u);
    EXPECT_EQ(stats[0].type().dtype, DType::F16);
    EXPECT_EQ(stats[1].type().dtype, DType::F32); // statistics stay f32
    t.add(k.grad, {k.x, k.scale, stats[1], stats[2], randomTensor(k.x.type(), rng)}, kF16Tol);
  }
  for (const PoolCase &pc : poolCases()) {
    OneNode &c = t.graph();
    Dims shape{4, 5, 35, 35};
    TensorType xt(DType::F16, shape);
    Value *x = c.input("x", xt);
    Node *n = c.node(pc.op, {x}, pc.attrs, "pool");
    ASSERT_TRUE(n);
    Tensor xv = randomTensor(xt, rng);
    t.add(n, {xv}, pc.op == Op::MaxPool ? -1 : kF16Tol, pc.what);
    Tensor dy = randomTensor(n->result()->type(), rng);
    if (pc.op == Op::MaxPool) {
      Node *g = c.node(Op::MaxPoolGrad, {x, c.input("dy", n->result()->type())}, pc.attrs, "grad");
      ASSERT_TRUE(g);
      t.add(g, {xv, dy}, kF16Tol, pc.what);
    } else {
      Attrs ga = pc.attrs;
      ga.set("input_shape", Ints(shape.begin(), shape.end()));
      Node *g = c.node(Op::AveragePoolGrad, {c.input("dy", n->result()->type())}, ga, "grad");
      ASSERT_TRUE(g);
      t.add(g, {dy}, kF16Tol, pc.what);
    }
  }
  {
    OneNode &c = t.graph();
    Node *n =
        c.node(Op::GlobalAveragePool, {c.input("x", TensorType(DType::F16, {16, 2048, 8, 8}))});
    ASSERT_TRUE(n);
    t.add(n, {randomTensor(n->operand(0)->type(), rng)}, kF16Tol);
  }
  const std::pair<Dims, Ints> reductions[] = {
      {{4, 5, 6}, {0, 2}}, {{32, 64, 17, 17}, {0, 2, 3}}, {{3, 70001}, {1}}, {{2, 0, 3}, {1}}};
  for (Op op : {Op::ReduceSum, Op::ReduceMean})
    for (const auto &[shape, axes] : reductions) {
      OneNode &c = t.graph();
      Attrs a;
      a.set("axes", axes);
      Node *n = c.node(op, {c.input("x", TensorType(DType::F16, shape))}, a);
      ASSERT_TRUE(n);
      t.add(n, {randomTensor(n->operand(0)->type(), rng)}, kF16Tol, shapeToString(shape));
    }
  t.compareOnGpu();
}

TEST(CudaLossScale, CheckFiniteFindsANonFiniteValueAnywhere) {
  // 70 gradients (three launches of up to 32 tensors), an empty one and one
  // longer than a launch's grid; a non-finite value planted in the first,
  // the 34th or the last tensor, at its last element; the largest finite
  // values pass.
  std::mt19937 rng(63);
  TwinCases t;
  const double largest[] = {3.4028234663852886e38, 65504, 3.3895313892515355e38};
  const DType types[] = {DType::F32, DType::F16, DType::BF16};
  for (int d = 0; d < 3; ++d) {
    std::vector<TensorType> shapes;
    for (int i = 0; i < 70; ++i)
      shapes.push_back(TensorType(types[d], {i == 5 ? 0 : 1 + (i * 7919) % 3000}));
    shapes[40] = TensorType(types[d], {(1 << 20) + 5});
    for (int where : {-1, 0, 33, 69})
      for (double bad : {(double)INFINITY, -(double)INFINITY, (double)NAN}) {
        if (where < 0 && !std::isnan(bad))
          continue;
        OneNode &c = t.graph();
        std::vector<Value *> in;
        std::vector<Tensor> values;
        for (size_t i = 0; i < shapes.size(); ++i) {
          in.push_back(c.input((llvm::Twine("g") + llvm::Twine(i)).str(), shapes[i]));
          values.push_back(randomTensor(shapes[i], rng, -1e3, 1e3));
        }
        values[40].set(7, largest[d]);
        values[69].set(0, -largest[d]);
        if (where >= 0)
          values[where].set(values[where].numElements() - 1, bad);
        Node *n = c.node(Op::CheckFinite, in, {}, "check");
        ASSERT_TRUE(n);
        std::string what = (dtypeName(types[d]) + " planted in " + llvm::Twine(where)).str();
        const std::vector<Tensor> *y = t.add(n, values, -1, what);
        ASSERT_TRUE(y);
        EXPECT_EQ((*y)[0].at(0), where < 0 ? 0.0 : (double)INFINITY) << what;
      }
  }
  // A check of checks (the plan's check over every device's).
  OneNode &c = t.graph();
  TensorType s(DType::F32, {});
  Node *n = c.node(Op::CheckFinite, {c.input("a", s), c.input("b", s), c.input("c", s)}, {}, "all");
  ASSERT_TRUE(n);
  const std::vector<Tensor> *all = t.add(
      n, {Tensor::scalar(0), Tensor::scalar(INFINITY), Tensor::scalar(0)}, -1, "check of checks");
  ASSERT_TRUE(all);
  EXPECT_EQ((*all)[0].at(0), (double)INFINITY);
  t.compareOnGpu();
}

TEST(CudaLossScale, TheStepMovesTheScaleAsOnTheCpu) {
  // Growth interval 2 from 4: doubling, halving, the floor of 1, and the
  // decision {apply, 1 / scale, skipped before} of every step, on the CPU
  // and then on the GPU with its own copy of the state.
  OneNode c;
  TensorVariables start;
  for (llvm::StringRef name : {kLossScaleVar, kGoodStepsVar, kSkippedStepsVar}) {
    Variable v;
    v.name = name.str();
    v.type = TensorType(DType::F32, {});
    v.kind = VarKind::State;
    c.module().addVariable(v);
    start.tensors[name] = Tensor::scalar(name == kLossScaleVar ? 4.0f : 0.0f);
  }
  Attrs a;
  a.set("var", kLossScaleVar.str());
  a.set("slots", Strings{kGoodStepsVar.str(), kSkippedStepsVar.str()});
  a.set("growth_interval", int64_t(2));
  Node *n = c.node(Op::LossScaleStep, {c.input("check", TensorType(DType::F32, {}))}, a, "step");
  ASSERT_TRUE(n);
  const float inf = INFINITY;
  const float checks[] = {0, 0, 0, inf, inf, inf, inf, 0, 0, 0, inf, 0};
  auto run = [&](bool gpu, TensorVariables &vars, std::vector<std::vector<float>> &seen) {
    for (float check : checks) {
      CudaRun options;
      options.variables = &vars;
      auto out = gpu ? runOnCuda(*n, {Tensor::scalar(check)}, options)
                     : runNode(*n, {Tensor::scalar(check)}, &vars);
      ASSERT_TRUE((bool)out) << llvm::toString(out.takeError());
      std::vector<float> row;
      for (int i = 0; i < 3; ++i)
        row.push_back((float)(*out)[0].at(i));
      for (llvm::StringRef name : {kLossScaleVar, kGoodStepsVar, kSkippedStepsVar})
        row.push_back((float)vars.tensors[name].at(0));
      seen.push_back(row);
    }
  };
  TensorVariables cpuVars, gpuVars;
  for (auto &e : start.tensors) {
    cpuVars.tensors[e.first()] = e.second.clone();
    gpuVars.tensors[e.first()] = e.second.clone();
  }
  std::vector<std::vector<float>> cpu, gpu;
  run(false, cpuVars, cpu);
  // The CPU's own run, by the rule: 4 -> 8 after two finite steps, halved
  // four times to the floor of 1, 2 after two more, 1 after the last
  // overflow; five steps skipped.
  EXPECT_EQ(cpu[2][3], 8);
  EXPECT_EQ(cpu[6][3], 1);
  EXPECT_EQ(cpu[10][3], 1);
  EXPECT_EQ(cpu.back()[3], 1);
  EXPECT_EQ(cpu.back()[5], 5);
  SKIP_WITHOUT_CUDA();
  run(true, gpuVars, gpu);
  EXPECT_EQ(gpu, cpu);
}

} // namespace
} // namespace graphc
