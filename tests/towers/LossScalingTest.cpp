//===- LossScalingTest.cpp - Dynamic loss scaling (passes/LossScaling.h) ---===//
//
// The rule (kernels/LossScaleRule.h) step by step; what the pass writes on one
// device and on two towers under every --params mode; and what training does
// with it: a power-of-two scale whose gradients stay finite trains exactly
// as without one (scaling by 2^k and back is exact in floating point), the
// scale doubles after its growth interval, and in fp16 (emulated on CPU
// devices) an overflowing scale skips the update, halves and settles, while
// small_cnn ends where f32 training of as many updates ends.
//
//===----------------------------------------------------------------------===//

#include "passes/LossScaling.h"
#include "ir/Builder.h"
#include "kernels/KernelRunner.h"
#include "kernels/LossScaleRule.h"
#include "tests/towers/TowerTestUtil.h"

#include <cmath>

using namespace graphc;
using namespace graphc::towertest;

namespace {

const char *const kScaledSingle = "bind-batch,training-mode,add-loss,mixed-precision,autodiff,"
                                  "add-optimizer,loss-scaling,dce,verify";
const char *const kScaledTowers =
    "bind-batch,training-mode,add-loss,mixed-precision,autodiff,add-optimizer,replicate-towers,"
    "split-batch,concat-outputs,aggregate-gradients,loss-scaling,dce,verify";

TEST(LossScaleRule, GrowsAfterTheIntervalAndHalvesOnOverflow) {
  float scale = 8, good = 0, skipped = 0, d[3];
  const float inf = INFINITY;
  lossScaleStep(0, 2, scale, good, skipped, d);
  EXPECT_EQ((std::vector<float>{d[0], d[1], d[2]}), (std::vector<float>{1, 0.125f, 0}));
  EXPECT_EQ(scale, 8);
  lossScaleStep(0, 2, scale, good, skipped, d); // the second finite step: x2
  EXPECT_EQ(scale, 16);
  EXPECT_EQ(good, 0);
  lossScaleStep(inf, 2, scale, good, skipped, d); // overflow: skip, /2
  EXPECT_EQ((std::vector<float>{d[0], d[1], d[2]}), (std::vector<float>{0, 1 / 16.0f, 0}));
  EXPECT_EQ(scale, 8);
  EXPECT_EQ(skipped, 1);
  lossScaleStep(0, 2, scale, good, skipped, d);
  EXPECT_EQ(d[2], 1); // skipped steps before this one
  // Never below 1, never to infinity.
  scale = 1;
  lossScaleStep(inf, 2, scale, good, skipped, d);
  EXPECT_EQ(scale, 1);
  scale = 3e38f;
  good = 1;
  lossScaleStep(0, 2, scale, good, skipped, d);
  EXPECT_EQ(scale, 3e38f);
}

std::unique_ptr<Module> compiled(llvm::StringRef model, CompileOptions o, bool towers) {
  auto m = buildOrFail(model, {});
  if (!m)
    return nullptr;
  if (auto e = runPipeline(*m, towers ? kScaledTowers : kScaledSingle, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  return m;
}

/// Checks the graph's scaled loss gradients and checked updates; returns the
/// LossScaleStep nodes.
std::vector<const Node *> checkScaled(Module &m) {
  std::vector<const Node *> steps;
  int grads = 0, applies = 0;
  for (const Node *n : m.main().nodes()) {
    if (n->op() == Op::LossScaleStep)
      steps.push_back(n);
    if (n->op() == Op::SoftmaxCrossEntropyGrad) {
      ++grads;
      const Node *mul = n->operand(2)->producer();
      EXPECT_EQ(mul->op(), Op::Mul) << n->name();
      const Node *read = mul->operand(1)->producer();
      EXPECT_EQ(read->op(), Op::Variable);
      EXPECT_EQ(read->attrs().getString("var"), kLossScaleVar);
    }
    if (isVariableUpdate(n->op()) && n->op() != Op::Assign && n->op() != Op::LossScaleStep) {
      ++applies;
      EXPECT_EQ(n->numOperands(), 3u) << n->name();
      if (n->numOperands() == 3) {
        EXPECT_EQ(n->operand(2)->producer()->op(), Op::LossScaleStep) << n->name();
      }
    }
  }
  EXPECT_GT(grads, 0);
  EXPECT_GT(applies, 0);
  for (const Variable *v : {m.findVariable(kLossScaleVar), m.findVariable(kGoodStepsVar),
                            m.findVariable(kSkippedStepsVar)}) {
    EXPECT_TRUE(v && v->kind == VarKind::State && v->type == TensorType(DType::F32, {}));
  }
  return steps;
}

TEST(LossScaling, OneDevicePlan) {
  CompileOptions o;
  o.batch = 8;
  o.lossScale = 1024;
  o.lossScaleInterval = 10;
  auto m = compiled("small_cnn", o, false);
  ASSERT_TRUE(m);
  auto steps = checkScaled(*m);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0]->operand(0)->producer()->op(), Op::CheckFinite);
  EXPECT_EQ(steps[0]->attrs().getInt("growth_interval"), 10);
  EXPECT_EQ(m->plan().lossScale, 1024);
  EXPECT_EQ(m->findVariable(kLossScaleVar)->init.args, std::vector<double>{1024});
  // Without --loss-scale nothing changes.
  o.lossScale = 0;
  auto plain = compiled("small_cnn", o, false);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->findVariable(kLossScaleVar));
  EXPECT_FALSE(plain->plan().lossScale);
}

TEST(LossScaling, TowersDecideOncePerUpdateDevice) {
  for (const char *params : {"cpu", "spread", "mirrored"}) {
    SCOPED_TRACE(params);
    CompileOptions o;
    o.batch = 8;
    o.towers = 2;
    o.lossScale = 256;
    o.params = cantFail(parseParamPlacement(params));
    auto m = compiled("small_cnn", o, true);
    ASSERT_TRUE(m);
    auto steps = checkScaled(*m);
    int checks = 0;
    for (const Node *n : m->main().nodes())
      checks += n->op() == Op::CheckFinite;
    const Variable *scale = m->findVariable(kLossScaleVar);
    if (llvm::StringRef(params) == "mirrored") {
      // Each tower decides on its all-reduced gradients, on its replica.
      ASSERT_EQ(steps.size(), 2u);
      EXPECT_EQ(checks, 2);
      EXPECT_EQ(scale->devices, (std::vector<DeviceId>{DeviceId::gpu(0), DeviceId::gpu(1)}));
      for (const Node *s : steps)
        for (const Value *d : {s->result(0)})
          for (const Node *apply : d->users())
            EXPECT_EQ(apply->requestedDevice(), s->requestedDevice()) << apply->name();
    } else {
      // One decision for every device's updates; spread checks per GPU first.
      ASSERT_EQ(steps.size(), 1u);
      EXPECT_EQ(checks, llvm::StringRef(params) == "spread" ? 3 : 1);
      EXPECT_EQ(scale->devices.size(), 1u);
    }
  }
}

TEST(LossScaling, RefusesWhatItCannotScale) {
  CompileOptions o;
  o.batch = 8;
  o.lossScale = 0.5;
  auto m = buildOrFail("small_cnn", {});
  ASSERT_TRUE(m);
  auto e = runPipeline(*m, kScaledSingle, o);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find(">= 1"), std::string::npos);
  // Before add-optimizer there is nothing to gate.
  o.lossScale = 2;
  m = buildOrFail("small_cnn", {});
  e = runPipeline(*m, "bind-batch,training-mode,add-loss,loss-scaling", o);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("no optimizer update"), std::string::npos);
  EXPECT_FALSE(bool(parseLossScale("1e999")));
  EXPECT_FALSE(bool(parseLossScale("x")));
  EXPECT_EQ(cantFail(parseLossScale("off")), 0);
  EXPECT_EQ(cantFail(parseLossScale("65536")), 65536);
}

struct ScaledRun {
  std::map<std::string, Tensor> variables; ///< without the scale's own
  std::vector<double> scales;              ///< after each step
  std::vector<bool> skips;                 ///< whether each step was skipped
  double skipped = 0;
  std::map<std::string, Tensor> afterFirst;
};

ScaledRun trainScaled(llvm::StringRef model, models::ModelOptions mo, CompileOptions o, int steps,
                      float lr) {
  ScaledRun r;
  auto m = buildOrFail(model, mo);
  if (!m)
    return r;
  bool towers = o.towers > 1;
  if (auto e = runPipeline(*m, towers ? kScaledTowers : kScaledSingle, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return r;
  }
  assignRequested(*m);
  if (auto e = runPipeline(*m, "insert-transfers,verify", o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return r;
  }
  auto ex = makeExecutor(*m);
  if (!ex)
    return r;
  Batch b = randomBatch(m->main().findInput("input")->result()->type(), 10, 42);
  for (int s = 0; s < steps; ++s) {
    if (auto out = train(*ex, b, 1, lr); !out) {
      ADD_FAILURE() << llvm::toString(out.takeError());
      return r;
    }
    if (s == 0)
      r.afterFirst = variables(*ex);
    if (o.lossScale > 0) {
      r.scales.push_back(cantFail(ex->readVariable(kLossScaleVar)).at(0));
      double total = cantFail(ex->readVariable(kSkippedStepsVar)).at(0);
      r.skips.push_back(total > r.skipped);
      r.skipped = total;
    }
  }
  r.variables = variables(*ex);
  for (llvm::StringRef v : {kLossScaleVar, kGoodStepsVar, kSkippedStepsVar}) {
    r.variables.erase(v.str());
    r.afterFirst.erase(v.str());
  }
  return r;
}

TEST(LossScaling, APowerOfTwoTrainsExactlyAsWithout) {
  // Finite gradients: scaling by 2^k and unscaling by 2^-k is exact, so the
  // weights are those of unscaled training (to float rounding of the
  // libraries' reassociation, which scaling does not change either). The
  // scale doubles every 2 steps.
  models::ModelOptions mo;
  mo.dropout = 0;
  for (auto [model, towers, params] : {std::tuple{"small_cnn_nobn", 1, "cpu"},
                                       {"small_cnn", 2, "mirrored"},
                                       {"mlp", 2, "spread"}}) {
    SCOPED_TRACE(model);
    mo = {};
    if (llvm::StringRef(model) != "mlp")
      mo.dropout = 0;
    CompileOptions o;
    o.batch = 8;
    o.towers = towers;
    o.params = cantFail(parseParamPlacement(params));
    o.optimizer = "adam";
    ScaledRun plain = trainScaled(model, mo, o, 5, 0.01f);
    o.lossScale = 4096;
    o.lossScaleInterval = 2;
    ScaledRun scaled = trainScaled(model, mo, o, 5, 0.01f);
    EXPECT_EQ(scaled.scales, (std::vector<double>{4096, 8192, 8192, 16384, 16384}));
    EXPECT_EQ(scaled.skipped, 0);
    // Scaling by a power of two commutes with every rounding (nothing here
    // overflows or falls below f32's normal range), so the sums round alike.
    expectSameBits(scaled.variables, plain.variables, model);
  }
}

TEST(LossScaling, Fp16OverflowSkipsUpdatesThenTrainsLikeF32) {
  // fp16 on two emulated GPUs: 2^24 overflows f16's 65504 in the backward
  // pass, so the first step changes nothing and halves the scale, and so
  // does every step that overflows until the gradients fit. The others train
  // like f32 with as many updates.
  models::ModelOptions mo;
  mo.dropout = 0;
  CompileOptions o;
  o.batch = 16;
  o.towers = 2;
  o.params = cantFail(parseParamPlacement("mirrored"));
  o.precision = Precision::FP16;
  o.lossScale = 16777216;
  const int steps = 12;
  ScaledRun fp16 = trainScaled("small_cnn_nobn", mo, o, steps, 0.05f);
  ASSERT_EQ(fp16.scales.size(), (size_t)steps);
  ASSERT_TRUE(fp16.skips[0]);
  ASSERT_LT(fp16.skipped, steps - 2);
  double scale = o.lossScale;
  for (int s = 0; s < steps; ++s) {
    scale *= fp16.skips[s] ? 0.5 : 1;
    EXPECT_EQ(fp16.scales[s], scale) << "step " << s + 1;
  }

  CompileOptions f32 = o;
  f32.precision = Precision::FP32;
  f32.lossScale = 0;
  ScaledRun reference = trainScaled("small_cnn_nobn", mo, f32, steps - (int)fp16.skipped, 0.05f);
  ScaledRun initial = trainScaled("small_cnn_nobn", mo, f32, 0, 0.05f);
  ASSERT_FALSE(reference.variables.empty());
  for (auto &[name, want] : reference.variables) {
    SCOPED_TRACE(name);
    EXPECT_EQ(fp16.variables.at(name).type().dtype, DType::F32); // master weights
    EXPECT_TRUE(sumbound::sameBits(fp16.afterFirst.at(name), initial.variables.at(name)));
    // f16 activations and gradients: the first step's gradients are 2-4%
    // (relative L2) from f32's on the layers below the f32 classifier, where
    // bf16's are 7-11% (MixedPrecisionTest); weights stay closer. This
    // compares two precisions, not two groupings of one computation: the bar
    // is the measured deviation with room, not a rounding bound (a gradient's
    // cancellation multiplies its 2·7·u_f16 = 6.8e-3 by up to ~5).
    bool slot = llvm::StringRef(name).endswith(".momentum");
    EXPECT_LT(relativeL2(fp16.variables.at(name), want), slot ? 0.25 : 3e-2);
  }
}

TEST(LossScaling, ApplyReadsTheDecision) {
  // ApplyAdam on four elements against PyTorch's formula, by hand: the
  // gradient divided by the scale, and t counting the updates made (step 5,
  // 3 skipped before: t = 3); a skipped step leaves everything as it was.
  Module m;
  for (const char *v : {"p", "p.m", "p.v"}) {
    Variable var;
    var.name = v;
    var.type = TensorType(DType::F32, {4});
    var.kind = std::string(v) == "p" ? VarKind::Param : VarKind::Slot;
    m.addVariable(std::move(var));
  }
  Builder b(m.addGraph("main"));
  Attrs a;
  a.set("var", std::string("p"));
  a.set("slots", Strings{"p.m", "p.v"});
  Node *adam = b.createNode(Op::ApplyAdam,
                            {b.input("g", TensorType(DType::F32, {4})),
                             b.input("lr", TensorType(DType::F32, {})),
                             b.input("decision", TensorType(DType::F32, {3}))},
                            std::move(a));
  const float p0[4] = {1, -2, 0.5f, 3}, g[4] = {4, -8, 0.25f, 0}, m0 = 0.1f, v0 = 0.2f;
  Tensor grad(TensorType(DType::F32, {4}));
  for (int i = 0; i < 4; ++i)
    grad.set(i, g[i]);
  for (float apply : {1.0f, 0.0f}) {
    SCOPED_TRACE(apply);
    TensorVariables vars;
    for (const char *v : {"p", "p.m", "p.v"}) {
      Tensor t(TensorType(DType::F32, {4}));
      for (int i = 0; i < 4; ++i)
        t.set(i, std::string(v) == "p" ? p0[i] : std::string(v) == "p.m" ? m0 : v0);
      vars.tensors[v] = t;
    }
    Tensor decision(TensorType(DType::F32, {3}));
    decision.set(0, apply);
    decision.set(1, 0.5);
    decision.set(2, 3);
    auto ran = runNode(*adam, {grad, Tensor::scalar(0.01f), decision}, &vars, /*step=*/5);
    ASSERT_TRUE(bool(ran)) << llvm::toString(ran.takeError());
    for (int i = 0; i < 4; ++i) {
      double d = g[i] * 0.5, t = 3;
      double mm = 0.9 * m0 + 0.1 * d, vv = 0.999 * v0 + 0.001 * d * d;
      double want = p0[i] - 0.01 / (1 - std::pow(0.9, t)) * mm /
                                (std::sqrt(vv) / std::sqrt(1 - std::pow(0.999, t)) + 1e-8);
      if (apply == 0)
        want = p0[i];
      EXPECT_NEAR(vars.tensors["p"].at(i), want, 1e-6 * std::abs(want) + 1e-7) << i;
      EXPECT_NEAR(vars.tensors["p.m"].at(i), apply ? mm : m0, 1e-6) << i;
    }
  }
}

} // namespace
