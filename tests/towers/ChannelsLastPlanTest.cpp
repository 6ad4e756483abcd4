//===- ChannelsLastPlanTest.cpp - Which GPU values are NHWC, and the copies --===//
//
// The layout assignment (executor/LayoutAssignment.h) on whole placed
// training plans, without a GPU: each GPU node answers with its CUDA
// kernel's rules (kernels/cuda/GpuLayoutRules.h), the batch plumbing runs
// where the executor runs it (executor/BatchStaging.h), and the copies each
// kernel then makes per step are counted (gpuLayoutCopies). For
// inception_v3 in fp16 and bf16 every activation between convolutions,
// batch norms, pools, concatenations and elementwise ops is channels-last,
// and the only layout copies are fused into conversions that run anyway
// (the input's and the weights' casts; in bf16 the convolutions' own
// narrowing of their f32 weights): no convolution or batch norm transposes
// anything; resnet18's too, residual adds included. Under nchw, and for f32
// under auto, nothing is channels-last; under nhwc an f32 plan's
// convolutions transpose only their f32 weights (kept plain) and the image.
// Host devices never take channels-last.
//
//===----------------------------------------------------------------------===//

#include "PlacedTrainingPlan.h"
#include "TowerTestUtil.h"

#include "executor/BatchStaging.h"
#include "executor/LayoutAssignment.h"
#include "ir/DeviceId.h"
#include "kernels/LayoutAnswers.h"
#include "placement/Placer.h"

#if GRAPHC_HAVE_CUDA
#include "kernels/cuda/GpuLayoutRules.h"
#endif

#include <iostream>

using namespace graphc;
using namespace graphc::towertest;

namespace {

#if GRAPHC_HAVE_CUDA

constexpr Layout kCL = Layout::ChannelsLast;

struct PlanRequest {
  std::string model = "inception_v3";
  Precision precision = Precision::FP16;
  GpuLayout policy = GpuLayout::Auto;
  int towers = 1;
  std::string params = "gpu:0";
};

/// A placed plan with every value's layout and every GPU node's copies.
struct PlanLayouts {
  std::unique_ptr<Module> module;
  std::map<const Node *, DeviceId> device;
  std::vector<std::unique_ptr<Kernel>> kernels;
  llvm::DenseMap<const Value *, Layout> layouts;
  cuda::LayoutCopies copies;
  std::map<std::string, int64_t> fusedByOp, separateByOp;

  Layout of(const Value *v) const {
    auto it = layouts.find(v);
    return it == layouts.end() ? Layout::Plain : it->second;
  }
  bool onGpu(const Node *n) const { return device.at(n).isGpu(); }
  int64_t channelsLast() const {
    return llvm::count_if(layouts, [](const auto &e) { return e.second == kCL; });
  }
};

bool hasKernel(Op op) {
  return op != Op::Input && op != Op::Variable && op != Op::Constant && op != Op::AllReduce &&
         op != Op::Transfer;
}

/// inception_v3 at a small image (75), the others at theirs, batch 8,
/// compiled by the default training pipeline and placed by the real placer.
PlanLayouts assignPlan(const PlanRequest &r) {
  PlanLayouts p;
  models::ModelOptions mo;
  mo.imageSize = r.model == "inception_v3" ? 75 : 0;
  CompileOptions o;
  o.batch = 8;
  o.towers = r.towers;
  o.params = cantFail(parseParamPlacement(r.params));
  o.precision = r.precision;
  if (r.precision == Precision::FP16)
    o.lossScale = 65536;
  o.optimizer = "momentum";
  auto m = placedTrainingPlan(r.model, mo, o);
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return p;
  }
  p.module = std::move(*m);
  const Graph &g = p.module->main();
  auto assigned = [](const Node &n) { return n.assignedDevice().value_or(DeviceId::host()); };
  auto staged = stageBatchOnDevices(g, assigned);
  for (const Node *n : g.nodes()) {
    auto it = staged.find(n);
    p.device[n] = it != staged.end() ? it->second : assigned(*n);
  }
  std::map<DeviceId, unsigned> index;
  std::vector<LayoutSite> sites;
  for (const Node *n : g.nodes()) {
    LayoutSite s;
    s.node = n;
    s.device = index.try_emplace(p.device[n], (unsigned)index.size()).first->second;
    s.kind = p.device[n].kind;
    if (n->op() == Op::Transfer)
      s.copiesAsIs = p.device[n->operand(0)->producer()].kind == s.kind;
    if (hasKernel(n->op())) {
      // The host's own kernels answer for Blocked only; a plain stand-in is
      // enough to see that nothing there becomes channels-last.
      LayoutAnswers a = s.kind == DeviceKind::GPU ? cuda::gpuLayoutAnswers(*n, r.policy)
                                                  : LayoutAnswers::plainOnly(*n);
      p.kernels.push_back(std::make_unique<DeclaredLayoutKernel>(a));
      s.kernel = p.kernels.back().get();
    }
    sites.push_back(s);
  }
  LayoutOptions lo;
  lo.gpu = r.policy;
  p.layouts = assignLayouts(sites, lo);
  for (const LayoutSite &s : sites) {
    if (!s.kernel || s.kind != DeviceKind::GPU)
      continue;
    std::vector<Layout> in, out;
    for (const Value *v : s.node->operands())
      in.push_back(p.of(v));
    for (auto &res : s.node->results())
      out.push_back(p.of(res.get()));
    cuda::LayoutCopies c = cuda::gpuLayoutCopies(*s.node, r.policy, in, out);
    p.copies.separate += c.separate;
    p.copies.fused += c.fused;
    const std::string op = opName(s.node->op()).str();
    if (c.separate)
      p.separateByOp[op] += c.separate;
    if (c.fused)
      p.fusedByOp[op] += c.fused;
  }
  return p;
}

std::string describe(const std::map<std::string, int64_t> &byOp) {
  std::string s;
  for (auto &[op, n] : byOp)
    s += (s.empty() ? "" : ", ") + op + " " + std::to_string(n);
  return s.empty() ? "none" : s;
}

/// The 4-D values of 16-bit floats made on a GPU that stay plain, by the op
/// that makes them and their shape.
std::map<std::string, int64_t> plainActivations(const PlanLayouts &p) {
  std::map<std::string, int64_t> plain;
  for (const Node *n : p.module->main().nodes())
    for (auto &r : n->results()) {
      const TensorType &t = r->type();
      if (p.onGpu(n) && t.rank() == 4 && (t.dtype == DType::F16 || t.dtype == DType::BF16) &&
          p.of(r.get()) != kCL)
        ++plain[opName(n->op()).str() + " " + shapeToString(t.shape)];
    }
  return plain;
}

void report(const char *what, const PlanLayouts &p) {
  std::cout << "[ layouts  ] " << what << ": " << p.channelsLast()
            << " values channels-last; per step " << p.copies.separate
            << " separate layout copies (" << describe(p.separateByOp) << "), " << p.copies.fused
            << " fused into conversions (" << describe(p.fusedByOp) << ")\n";
}

TEST(ChannelsLastPlan, InceptionSixteenBitHasNoSeparateCopies) {
  for (Precision precision : {Precision::FP16, Precision::BF16}) {
    PlanRequest r;
    r.precision = precision;
    PlanLayouts p = assignPlan(r);
    ASSERT_TRUE(p.module);
    const std::string what = std::string("inception_v3 ") + modeName(precision).str();
    report(what.c_str(), p);
    EXPECT_EQ(p.copies.separate, 0) << what << ": " << describe(p.separateByOp);
    // The copies ride on conversions: the casts (the input image and, in
    // fp16, the 94 weights and their 94 gradients); in bf16 the
    // convolutions' narrowing of their f32 weights (94 forward, 93 data
    // gradients) and widening of the 94 filter gradients. The batch norms
    // compute in NHWC: none.
    for (auto &[op, n] : p.fusedByOp)
      EXPECT_TRUE(op == "Cast" ||
                  (precision == Precision::BF16 &&
                   (op == "Conv" || op == "ConvGradData" || op == "ConvGradFilter")))
          << what << ": " << op << " " << n;
    EXPECT_EQ(p.copies.fused, precision == Precision::FP16 ? 1 + 94 + 94 : 1 + 94 + 93 + 94)
        << what << ": " << describe(p.fusedByOp);
    // Every 16-bit activation is channels-last but those of the head after
    // global average pooling ([n, c, 1, 1]: the same bytes in either layout;
    // the dropout, its mask and gradient, the cast to the classifier).
    std::map<std::string, int64_t> plain = plainActivations(p);
    std::cout << "[ layouts  ] " << what << ", plain 16-bit activations: " << describe(plain)
              << "\n";
    for (auto &[value, n] : plain)
      EXPECT_NE(value.find(",1,1]"), std::string::npos)
          << what << ": " << value << " (" << n << ")";
    // 483 in bf16, 671 in fp16 (fuse-bn-relu's gradient half took 94 ReluGrads' values).
    EXPECT_GT(p.channelsLast(), 450) << what;
  }
}

TEST(ChannelsLastPlan, Resnet18SixteenBitHasNoSeparateCopiesEitherWithItsResidualAdds) {
  for (Precision precision : {Precision::FP16, Precision::BF16}) {
    PlanRequest r;
    r.model = "resnet18";
    r.precision = precision;
    PlanLayouts p = assignPlan(r);
    ASSERT_TRUE(p.module);
    const std::string what = std::string("resnet18 ") + modeName(precision).str();
    report(what.c_str(), p);
    EXPECT_EQ(p.copies.separate, 0) << what << ": " << describe(p.separateByOp);
    for (auto &[value, n] : plainActivations(p))
      EXPECT_NE(value.find(",1,1]"), std::string::npos)
          << what << ": " << value << " (" << n << ")";
    int64_t residuals = 0;
    for (const Node *n : p.module->main().nodes())
      if (n->op() == Op::Add && n->result()->type().rank() == 4) {
        ++residuals;
        EXPECT_EQ(p.of(n->result()), kCL) << n->name();
      }
    EXPECT_EQ(residuals, 8) << what << ": resnet18's basic blocks";
  }
}

TEST(ChannelsLastPlan, EveryConvolutionOfInceptionFp16ComputesOnChannelsLastTensors) {
  PlanLayouts p = assignPlan({});
  ASSERT_TRUE(p.module);
  int64_t convolutions = 0;
  for (const Node *n : p.module->main().nodes()) {
    if (!isConvolution(n->op()))
      continue;
    ++convolutions;
    EXPECT_TRUE(cuda::convComputesChannelsLast(*n, GpuLayout::Auto)) << n->name();
    for (const Value *v : n->operands()) {
      if (v->type().rank() == 4) {
        EXPECT_EQ(p.of(v), kCL) << n->name() << " operand " << v->name();
      }
    }
    EXPECT_EQ(p.of(n->result()), kCL) << n->name();
  }
  EXPECT_EQ(convolutions, 94 + 93 + 94) << "forward, data and filter gradients";
}

TEST(ChannelsLastPlan, NchwAndF32UnderAutoKeepEverythingPlain) {
  PlanRequest nchw;
  nchw.policy = GpuLayout::Nchw;
  PlanRequest f32;
  f32.precision = Precision::FP32;
  for (const PlanRequest &r : {nchw, f32}) {
    PlanLayouts p = assignPlan(r);
    ASSERT_TRUE(p.module);
    EXPECT_EQ(p.channelsLast(), 0) << gpuLayoutName(r.policy).str();
    EXPECT_EQ(p.copies.separate + p.copies.fused, 0);
  }
}

TEST(ChannelsLastPlan, F32UnderNhwcTransposesOnlyItsWeightsAndTheImage) {
  PlanRequest r;
  r.precision = Precision::FP32;
  r.policy = GpuLayout::Nhwc;
  PlanLayouts p = assignPlan(r);
  ASSERT_TRUE(p.module);
  report("inception_v3 fp32 under nhwc", p);
  // The batch norms compute in NHWC in f32 too, so the activations stay
  // channels-last between the convolutions, which transpose only their f32
  // weights (variables stay plain: 94 forward, 93 data gradients, 94 filter
  // gradients written back) and the plain image (the first convolution and
  // its filter gradient). (482 values: the fused batch-norm gradient left no
  // ReluGrad results, fuse-bn-relu.)
  EXPECT_GT(p.channelsLast(), 450);
  EXPECT_EQ(p.copies.separate, 94 + 93 + 94 + 2) << describe(p.separateByOp);
  for (auto &[op, n] : p.separateByOp)
    EXPECT_TRUE(op == "Conv" || op == "ConvGradData" || op == "ConvGradFilter") << op;
}

TEST(ChannelsLastPlan, SmallCnnWithoutBatchNormsIsChannelsLastBetweenItsConvolutions) {
  PlanRequest r;
  r.model = "small_cnn_nobn";
  PlanLayouts p = assignPlan(r);
  ASSERT_TRUE(p.module);
  report("small_cnn_nobn fp16", p);
  EXPECT_EQ(p.copies.separate, 0) << describe(p.separateByOp);
  // The casts, and the sums of the convolutions' bias gradients (f16
  // reductions widen to f32 anyway).
  for (auto &[op, n] : p.fusedByOp)
    EXPECT_TRUE(op == "Cast" || op == "ReduceSum") << op << " " << n;
  int64_t activations = 0;
  for (const Node *n : p.module->main().nodes()) {
    if ((n->op() == Op::Relu || n->op() == Op::MaxPool || n->op() == Op::ReluGrad ||
         isConvolution(n->op())) &&
        n->result()->type().rank() == 4) {
      ++activations;
      EXPECT_EQ(p.of(n->result()), kCL) << n->name();
    }
  }
  EXPECT_GE(activations, 10);
}

TEST(ChannelsLastPlan, TowersKeepTheirOwnValuesAndTheHostTakesNone) {
  for (const char *params : {"mirrored", "cpu"}) {
    PlanRequest r;
    r.towers = 2;
    r.params = params;
    PlanLayouts p = assignPlan(r);
    ASSERT_TRUE(p.module);
    EXPECT_EQ(p.copies.separate, 0) << params << ": " << describe(p.separateByOp);
    EXPECT_GT(p.channelsLast(), 1000) << params << ": both towers";
    for (const Node *n : p.module->main().nodes())
      for (auto &res : n->results()) {
        if (!p.onGpu(n)) {
          EXPECT_NE(p.of(res.get()), kCL) << n->name() << " on " << p.device.at(n);
        }
        if (n->op() == Op::AllReduce || n->op() == Op::Transfer) {
          EXPECT_NE(p.of(res.get()), kCL) << n->name();
        }
      }
  }
}

#else

TEST(ChannelsLastPlan, NeedsTheCudaKernelsRules) {
  GTEST_SKIP() << "this build has no CUDA kernels, whose layout rules these plans are assigned by";
}

#endif

} // namespace
