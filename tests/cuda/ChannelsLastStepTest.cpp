//===- ChannelsLastStepTest.cpp - Whole training steps in NHWC against NCHW --===//
//
// small_cnn_nobn and inception_v3 (75x75, batch 8) compiled for one GPU in
// fp16 (and bf16 where the GPU has it), trained three steps on the same
// batch by two executors: --gpu-layout nchw and auto (channels-last for the
// 16-bit activations). The losses, the loss scale's decisions and every
// variable agree to the rounding of the convolutions' other algorithms; the
// auto executor keeps values channels-last, and the layout copies its
// kernels counted are those the host rules predict for its layouts
// (gpuLayoutCopies), so the host's counts of the plans (towers_tests
// ChannelsLastPlan) are the GPU's. Skipped ("no CUDA device") without a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaTestSupport.h"
#include "PlacedTrainingPlan.h"
#include "SumBound.h"

#include "executor/Executor.h"
#include "kernels/cuda/GpuLayoutRules.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <random>

using namespace graphc;

namespace {

struct StepCase {
  std::string model;
  Precision precision;
};

void PrintTo(const StepCase &c, std::ostream *os) {
  *os << c.model << " " << modeName(c.precision).str();
}

std::unique_ptr<Module> compileFor(const StepCase &c) {
  models::ModelOptions mo;
  mo.numClasses = 10;
  if (c.model == "inception_v3")
    mo.imageSize = 75;
  CompileOptions o;
  o.batch = 8;
  o.towers = 1;
  o.params = cantFail(parseParamPlacement("gpu:0"));
  o.precision = c.precision;
  // Low enough that no step overflows, so both runs update every step.
  if (c.precision == Precision::FP16)
    o.lossScale = 256;
  o.optimizer = "momentum";
  auto m = placedTrainingPlan(c.model, mo, o);
  EXPECT_TRUE(bool(m)) << (m ? "" : llvm::toString(m.takeError()));
  return m ? std::move(*m) : nullptr;
}

llvm::StringMap<Tensor> batchFor(Module &m) {
  llvm::StringMap<Tensor> f;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> pixel(-1, 1);
  const Node *input = m.main().findInput("input");
  Tensor x(input->result()->type());
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.data<float>()[i] = pixel(rng);
  Tensor labels(m.main().findInput("labels")->result()->type());
  for (int64_t i = 0; i < labels.numElements(); ++i)
    labels.set(i, (double)(i % 10));
  f["input"] = x;
  f["labels"] = labels;
  f["lr"] = Tensor::scalar(0.01f);
  return f;
}

struct Trained {
  std::vector<double> losses;
  std::map<std::string, Tensor> variables;
};

Trained train(Executor &ex, const llvm::StringMap<Tensor> &batch) {
  Trained t;
  for (int s = 0; s < 3; ++s) {
    auto out = ex.run(batch);
    EXPECT_TRUE(bool(out)) << (out ? "" : llvm::toString(out.takeError()));
    if (!out)
      return t;
    t.losses.push_back((*out)[0].at(0));
  }
  for (const std::string &name : ex.variableNames())
    t.variables[name] = cantFail(ex.readVariable(name));
  return t;
}

class ChannelsLastStep : public testing::TestWithParam<StepCase> {};

TEST_P(ChannelsLastStep, AgreesWithNchwAndCountsThePredictedCopies) {
  GRAPHC_REQUIRE_GPUS(1);
  const StepCase &c = GetParam();
  cudaDeviceProp props;
  if (c.precision == Precision::BF16 &&
      (cudaGetDeviceProperties(&props, 0) != cudaSuccess || props.major < 8))
    GTEST_SKIP() << "bf16 needs compute capability 8.0";
  auto m = compileFor(c);
  ASSERT_TRUE(m);
  llvm::StringMap<Tensor> batch = batchFor(*m);
  Trained runs[2];
  for (GpuLayout policy : {GpuLayout::Nchw, GpuLayout::Auto}) {
    ExecutorOptions o;
    o.seed = 3;
    o.gpuLayout = policy;
    o.profile = true; // the kernels' reorder counts
    o.physicalGpu = [](DeviceId) { return 0; };
    auto ex = Executor::create(*m, o);
    ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
    Trained &t = runs[policy == GpuLayout::Auto];
    t = train(**ex, batch);
    ASSERT_EQ(t.losses.size(), 3u);
    const int64_t last = (*ex)->valuesInLayout(Layout::ChannelsLast);
    if (policy == GpuLayout::Nchw) {
      EXPECT_EQ(last, 0);
      continue;
    }
    EXPECT_GT(last, 0);
    // The reorders each kernel ran are those the host rules predict.
    for (const NodeProfile &p : (*ex)->profile()) {
      if (p.device.rfind("gpu", 0) != 0)
        continue;
      std::vector<Layout> in, out;
      for (const Value *v : p.node->operands())
        in.push_back((*ex)->layoutOf(v));
      for (auto &r : p.node->results())
        out.push_back((*ex)->layoutOf(r.get()));
      cuda::LayoutCopies want = cuda::gpuLayoutCopies(*p.node, policy, in, out);
      EXPECT_EQ(p.reorders.reorders, (want.separate + want.fused) * p.runs)
          << p.node->name() << " (" << opName(p.node->op()).str() << ")";
    }
  }
  // Other convolution algorithms round otherwise; three steps stay close.
  for (int s = 0; s < 3; ++s)
    EXPECT_NEAR(runs[1].losses[s], runs[0].losses[s], 2e-2 * std::fabs(runs[0].losses[s]))
        << "step " << s;
  for (auto &[name, want] : runs[0].variables) {
    const Tensor &got = runs[1].variables.at(name);
    if (name == kLossScaleVar.str() || name == kSkippedStepsVar.str()) {
      EXPECT_TRUE(sumbound::sameBits(got, want)) << name;
      continue;
    }
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < want.numElements(); ++i) {
      diff += std::pow(got.at(i) - want.at(i), 2);
      norm += std::pow(want.at(i), 2);
    }
    EXPECT_LE(std::sqrt(diff), 2e-2 * std::sqrt(norm) + 1e-6) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ChannelsLastStep,
                         testing::Values(StepCase{"small_cnn_nobn", Precision::FP16},
                                         StepCase{"inception_v3", Precision::FP16},
                                         StepCase{"inception_v3", Precision::BF16}),
                         [](const testing::TestParamInfo<StepCase> &info) {
                           return info.param.model + "_" + modeName(info.param.precision).str();
                         });

} // namespace
