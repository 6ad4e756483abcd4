//===- TrainingTwinTest.cpp - Dropout, updates, determinism on the GPU ----===//
//
// DropoutTrain's masks (per element and per sample) equal the CPU's bit for
// bit, with the step given as an
// argument or read from the device's step counter; every optimizer update
// matches the CPU kernel (variables and slots after the update), alone and
// fused into tensor-list launches through Kernel::runGroup; repeated runs
// give the same bits (reductions, convolution gradients, batch norm); and
// the strict backend agrees with a TF32 one only loosely, so the switch
// does something.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace graphc {
namespace {

TEST(CudaTraining, DropoutMasksEqualTheCpuMasks) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(51);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t size : {1, 7, 4096, 4097, 100003, (1 << 20) + 3})
      for (double ratio : {0.0, 0.3, 1.0}) {
        OneNode c;
        c.builder().setTower(1);
        Attrs a;
        a.set("ratio", ratio);
        Node *n =
            c.node(Op::DropoutTrain, {c.input("x", TensorType(dt, {size}))}, a, "tower_1/drop");
        ASSERT_TRUE(n);
        Tensor x = randomTensor(n->operand(0)->type(), rng);
        for (uint64_t step : {0, 9})
          expectTwins(*n, {x}, -1, step, /*seed=*/77);
      }
}

TEST(CudaTraining, PerSampleDropoutMasksEqualTheCpuMasks) {
  // Stochastic depth (`mask = sample` or `tensor`): the mask's N values and
  // y, bit for bit the CPU's.
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(52);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t samples : {1, 7, 4097})
      for (const char *mask : {"sample", "tensor"}) {
        OneNode c;
        c.builder().setTower(1);
        Attrs a;
        a.set("ratio", 0.3);
        a.set("mask", std::string(mask));
        Node *n = c.node(Op::DropoutTrain, {c.input("x", TensorType(dt, {samples, 3, 5, 7}))}, a,
                         "tower_1/drop_path");
        ASSERT_TRUE(n);
        Tensor x = randomTensor(n->operand(0)->type(), rng);
        for (uint64_t step : {0, 9})
          expectTwins(*n, {x}, -1, step, /*seed=*/77);
      }
}

TEST(CudaTraining, DropoutReadsTheStepFromTheDeviceCounter) {
  // Under an executor the step reaches the kernel through the device's
  // counter, which a captured CUDA graph advances; the argument is ignored.
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(53);
  OneNode c;
  c.builder().setTower(1);
  Attrs a;
  a.set("ratio", 0.3);
  Node *n =
      c.node(Op::DropoutTrain, {c.input("x", TensorType(DType::F32, {100003}))}, a, "tower_1/drop");
  ASSERT_TRUE(n);
  Tensor x = randomTensor(n->operand(0)->type(), rng);
  for (uint64_t step : {0, 9, 1000}) {
    auto want = runNode(*n, {x}, nullptr, step, /*seed=*/77);
    ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
    CudaRun run;
    run.seed = 77;
    run.step = step + 5; // not what the counter says
    run.deviceStep = DeviceStep{step, 0};
    auto got = runOnCuda(*n, {x}, run);
    ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
    EXPECT_TRUE(sameBits((*got)[0], (*want)[0])) << "step " << step;
    EXPECT_TRUE(sameBits((*got)[1], (*want)[1])) << "step " << step;
  }
}

/// An update node for variable `name` of `shape` (slots name_s0, name_s1)
/// with its gradient and lr inputs, and with `decision`, LossScaleStep's
/// decision; fills `vars`.
Node *updateNode(OneNode &c, const UpdateCase &k, const std::string &name, Dims shape,
                 TensorVariables &vars, std::mt19937 &rng, bool decision = false) {
  TensorType t(DType::F32, shape);
  Strings slots;
  for (int s = 0; s < k.slots; ++s) {
    Variable v;
    v.name = (llvm::Twine(name) + "_s" + llvm::Twine(s)).str();
    v.type = t;
    v.kind = VarKind::Slot;
    c.module().addVariable(v);
    slots.push_back(v.name);
    vars.tensors[v.name] = randomTensor(t, rng, 0, 1);
  }
  Variable p;
  p.name = name;
  p.type = t;
  c.module().addVariable(p);
  vars.tensors[name] = randomTensor(t, rng);
  Attrs a = k.attrs;
  a.set("var", name);
  a.set("slots", slots);
  std::vector<Value *> in{c.input((llvm::Twine(name) + "_g").str(), t),
                          c.input((llvm::Twine(name) + "_lr").str(), TensorType(DType::F32, {}))};
  if (decision)
    in.push_back(c.input((llvm::Twine(name) + "_decision").str(), TensorType(DType::F32, {3})));
  return c.node(k.op, in, a, (llvm::Twine(name) + "_update").str());
}

TensorVariables copyOf(const TensorVariables &v) {
  TensorVariables out;
  for (auto &e : v.tensors)
    out.tensors[e.first()] = e.second.clone();
  return out;
}

TEST(CudaTraining, AssignAndEveryUpdateRule) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(52);
  for (const UpdateCase &k : updateCases())
    for (Dims shape : {Dims{1}, Dims{5, 13}, Dims{1 << 22}, Dims{0, 3}}) {
      OneNode c;
      TensorVariables vars;
      Node *n = updateNode(c, k, "w", shape, vars, rng);
      ASSERT_TRUE(n);
      Tensor g = randomTensor(n->operand(0)->type(), rng);
      Tensor lr = Tensor::scalar(0.05f);
      TensorVariables cpu = copyOf(vars), gpu = copyOf(vars);
      auto done = runNode(*n, {g, lr}, &cpu, /*step=*/4);
      ASSERT_TRUE((bool)done) << llvm::toString(done.takeError());
      CudaRun run;
      run.variables = &gpu;
      run.step = 4;
      auto ran = runOnCuda(*n, {g, lr}, run);
      ASSERT_TRUE((bool)ran) << llvm::toString(ran.takeError());
      for (auto &e : cpu.tensors)
        EXPECT_TRUE(closeTo(gpu.tensors[e.first()], e.second))
            << opName(k.op).str() << " " << e.first().str() << " " << shapeToString(shape);
    }
  for (DType dt : kAllDTypes) {
    OneNode c;
    TensorType t(dt, {3, 7});
    Variable v;
    v.name = "v";
    v.type = t;
    c.module().addVariable(v);
    Attrs a;
    a.set("var", std::string("v"));
    Node *n = c.node(Op::Assign, {c.input("x", t)}, a);
    ASSERT_TRUE(n);
    TensorVariables vars;
    vars.tensors["v"] = Tensor(t);
    Tensor x = randomTensor(t, rng, -9, 9);
    CudaRun run;
    run.variables = &vars;
    ASSERT_TRUE((bool)runOnCuda(*n, {x}, run));
    EXPECT_TRUE(sameBits(vars.tensors["v"], x)) << dtypeName(dt).str();
  }
}

TEST(CudaTraining, FusedUpdatesEqualSeparateOnes) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(53);
  for (const UpdateCase &k : updateCases()) {
    OneNode c;
    TensorVariables vars;
    std::vector<const Node *> nodes;
    std::vector<std::vector<Tensor>> inputs;
    // Many small tensors, an empty one and one spanning several launches.
    std::vector<Dims> shapes;
    for (int i = 0; i < 40; ++i)
      shapes.push_back(Dims{1 + (i * 37) % 300});
    shapes.push_back(Dims{0});
    // Past 320 chunks of 65536 a tensor continues in the next launch.
    if (k.op == Op::ApplySGD || k.op == Op::ApplyAdam)
      shapes.push_back(Dims{(int64_t)(330 * 65536 + 11)});
    for (size_t i = 0; i < shapes.size(); ++i) {
      Node *n = updateNode(c, k, (llvm::Twine("w") + llvm::Twine(i)).str(), shapes[i], vars, rng);
      ASSERT_TRUE(n);
      nodes.push_back(n);
      // Each update reads its own learning rate.
      inputs.push_back(
          {randomTensor(n->operand(0)->type(), rng), Tensor::scalar(0.01f * (float)(1 + i % 3))});
    }
    TensorVariables cpu = copyOf(vars), gpu = copyOf(vars);
    for (size_t i = 0; i < nodes.size(); ++i) {
      auto done = runNode(*nodes[i], inputs[i], &cpu, /*step=*/2);
      ASSERT_TRUE((bool)done) << llvm::toString(done.takeError());
    }
    auto fused = runGroupOnCuda(nodes, inputs, gpu, /*step=*/2);
    ASSERT_FALSE((bool)fused) << llvm::toString(std::move(fused));
    for (auto &e : cpu.tensors)
      EXPECT_TRUE(closeTo(gpu.tensors[e.first()], e.second))
          << opName(k.op).str() << " " << e.first().str();
  }
}

TEST(CudaTraining, UpdatesReadTheLossScaleDecision) {
  // Under dynamic loss scaling: applied with the scale divided out (Adam's
  // t counting the updates made: step 4, 2 skipped before), and skipped
  // (nothing changes); each update alone and all of one rule fused.
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(55);
  const Tensor decisions[] = {Tensor::fromFloats({3}, {1, 1.0f / 1024, 2}),
                              Tensor::fromFloats({3}, {0, 1.0f / 2048, 3})};
  for (const UpdateCase &k : updateCases())
    for (const Tensor &decision : decisions) {
      OneNode c;
      TensorVariables vars;
      std::vector<const Node *> nodes;
      std::vector<std::vector<Tensor>> inputs;
      for (int i = 0; i < 12; ++i) {
        Dims shape{i == 11 ? (1 << 20) + 7 : 1 + (i * 53) % 400};
        Node *n =
            updateNode(c, k, (llvm::Twine("w") + llvm::Twine(i)).str(), shape, vars, rng, true);
        ASSERT_TRUE(n);
        nodes.push_back(n);
        inputs.push_back({randomTensor(n->operand(0)->type(), rng, -1024, 1024),
                          Tensor::scalar(0.05f), decision});
      }
      TensorVariables cpu = copyOf(vars), alone = copyOf(vars), fused = copyOf(vars);
      for (size_t i = 0; i < nodes.size(); ++i) {
        auto done = runNode(*nodes[i], inputs[i], &cpu, /*step=*/4);
        ASSERT_TRUE((bool)done) << llvm::toString(done.takeError());
        CudaRun run;
        run.variables = &alone;
        run.step = 4;
        auto ran = runOnCuda(*nodes[i], inputs[i], run);
        ASSERT_TRUE((bool)ran) << llvm::toString(ran.takeError());
      }
      llvm::Error e = runGroupOnCuda(nodes, inputs, fused, /*step=*/4);
      ASSERT_FALSE((bool)e) << llvm::toString(std::move(e));
      bool skipped = decision.at(0) == 0;
      for (auto &v : cpu.tensors) {
        std::string what = opName(k.op).str() + " " + v.first().str() + (skipped ? " skipped" : "");
        if (skipped) {
          EXPECT_TRUE(sameBits(v.second, vars.tensors[v.first()])) << what;
        }
        EXPECT_TRUE(closeTo(alone.tensors[v.first()], v.second)) << what;
        EXPECT_TRUE(closeTo(fused.tensors[v.first()], v.second)) << what << " (fused)";
      }
    }
}

TEST(CudaTraining, UpdatesWithDifferentHyperParametersDoNotFuse) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(54);
  OneNode c;
  TensorVariables vars;
  auto cases = updateCases();
  Node *a = updateNode(c, cases[1], "a", {4}, vars, rng);
  Node *b = updateNode(c, cases[2], "b", {4}, vars, rng);
  ASSERT_TRUE(a && b);
  KernelEnv env;
  env.kind = DeviceKind::GPU;
  env.backend = strictBackend();
  auto ka = KernelRegistry::global().create(*a, env), kb = KernelRegistry::global().create(*b, env);
  ASSERT_TRUE(ka && kb);
  EXPECT_FALSE((*ka)->fusionKey().empty());
  EXPECT_NE((*ka)->fusionKey(), (*kb)->fusionKey());
  std::vector<std::vector<Tensor>> inputs(
      2, {Tensor(TensorType(DType::F32, {4})), Tensor::scalar(0.1f)});
  llvm::Error e = runGroupOnCuda({a, b}, inputs, vars);
  ASSERT_TRUE((bool)e);
  EXPECT_NE(llvm::toString(std::move(e)).find("cannot fuse"), std::string::npos);
}

/// Runs twice on the GPU and expects the same bits.
void expectRepeatable(const Node &n, llvm::ArrayRef<Tensor> inputs) {
  auto first = runOnCuda(n, inputs);
  ASSERT_TRUE((bool)first) << opName(n.op()).str() << ": " << llvm::toString(first.takeError());
  auto second = runOnCuda(n, inputs);
  ASSERT_TRUE((bool)second) << opName(n.op()).str() << ": " << llvm::toString(second.takeError());
  for (size_t r = 0; r < first->size(); ++r)
    EXPECT_TRUE(sameBits((*second)[r], (*first)[r])) << opName(n.op()).str() << " result " << r;
}

TEST(CudaTraining, RunsAreBitwiseRepeatable) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(55);
  OneNode c;
  TensorType xt(DType::F32, {16, 32, 20, 20}), wt(DType::F32, {64, 32, 3, 3});
  Attrs conv;
  conv.set("pads", Ints{1, 1, 1, 1});
  Node *y = c.node(Op::Conv, {c.input("x", xt), c.input("w", wt)}, conv, "conv");
  ASSERT_TRUE(y);
  Attrs gf = conv;
  gf.set("filter_shape", Ints{64, 32, 3, 3});
  Node *filter =
      c.node(Op::ConvGradFilter, {y->operand(0), c.input("dy", y->result()->type())}, gf, "gf");
  Attrs all;
  Node *sum =
      c.node(Op::ReduceSum, {c.input("big", TensorType(DType::F32, {1 << 23}))}, all, "sum");
  TensorType ct(DType::F32, {32});
  Node *bn =
      c.node(Op::BatchNormTrain, {y->operand(0), c.input("s", ct), c.input("b", ct)}, {}, "bn");
  ASSERT_TRUE(filter && sum && bn);
  Tensor x = randomTensor(xt, rng);
  expectRepeatable(*filter, {x, randomTensor(y->result()->type(), rng)});
  expectRepeatable(*sum, {randomTensor(sum->operand(0)->type(), rng)});
  expectRepeatable(*bn, {x, randomTensor(ct, rng), randomTensor(ct, rng)});
}

TEST(CudaTraining, Tf32SwitchChangesGemmsOnlyWithinItsPrecision) {
  SKIP_WITHOUT_CUDA();
  CudaBackendOptions options;
  options.allowTF32 = true;
  auto tf32 = CudaBackend::create(0, options);
  ASSERT_TRUE((bool)tf32) << llvm::toString(tf32.takeError());
  std::mt19937 rng(56);
  OneNode c;
  TensorType at(DType::F32, {256, 512}), bt(DType::F32, {512, 256});
  Node *n = c.node(Op::MatMul, {c.input("a", at), c.input("b", bt)});
  ASSERT_TRUE(n);
  Tensor a = randomTensor(at, rng), b = randomTensor(bt, rng);
  auto cpu = runNode(*n, {a, b});
  ASSERT_TRUE((bool)cpu);
  auto strict = runOnCuda(*n, {a, b});
  ASSERT_TRUE((bool)strict) << llvm::toString(strict.takeError());
  // cuBLAS and oneDNN each sum 512 products in orders of their own: twice
  // (K + 4)·u, 6.2e-5 (tests/common/SumBound.h).
  EXPECT_TRUE(closeTo((*strict)[0], (*cpu)[0], 2 * sumbound::bound(512 + 4)));
  // TF32 products keep 10 mantissa bits: far outside the strict tolerance
  // on an H100's tensor cores, well inside 1e-2.
  CudaRun run;
  run.backend = tf32->get();
  auto fast = runOnCuda(*n, {a, b}, run);
  ASSERT_TRUE((bool)fast) << llvm::toString(fast.takeError());
  double err = relativeError((*fast)[0], (*cpu)[0]);
  EXPECT_LT(err, 1e-2);
  EXPECT_GT(err, 1e-6) << "TF32 on made no difference";
}

} // namespace
} // namespace graphc
