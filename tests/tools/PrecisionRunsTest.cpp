//===- PrecisionRunsTest.cpp - Where a 16-bit plan may run ----------------===//
//
// tools/driver/PrecisionRuns.h's rules over plans compiled as graphc
// compiles them, with the machine stood in for (PrecisionMachine): bf16 on
// GPUs of compute capability 8.0 (whatever the host CPU has), on emulated
// GPUs and the host only with bf16 instructions, GPUs folded onto one
// physical GPU asked about that one; fp16's convolutions on GPUs.
//
//===----------------------------------------------------------------------===//

#include "tools/driver/PrecisionRuns.h"

#include "executor/Executor.h"
#include "frontend/models/Models.h"
#include "ir/DeviceId.h"
#include "ir/Module.h"
#include "kernels/Kernel.h"
#include "passes/strategy/CompilePlan.h"

#include <gtest/gtest.h>

#include <set>

using namespace graphc;

namespace {

/// `model` compiled for `gpus` GPUs (0: the host alone, unplaced) in `p`.
std::unique_ptr<Module> plan(int gpus, Precision p, llvm::StringRef model = "small_cnn",
                             BnMode bn = BnMode::Local) {
  models::ModelOptions mo;
  mo.auxLogits = model == "inception_v3";
  auto forward = models::buildModel(model, mo);
  if (!forward) {
    ADD_FAILURE() << llvm::toString(forward.takeError());
    return nullptr;
  }
  CompileRequest req;
  req.options.batch = 16;
  req.options.precision = p;
  req.options.bn = bn;
  PlacementRequest place;
  place.gpus = gpus;
  auto m = compilePlan(**forward, req, place);
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  EXPECT_EQ((*m)->plan().precision.value_or(Precision::FP32), p);
  return std::move(*m);
}

std::string message(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "ok";
}

/// A machine whose GPUs in `t4s` refuse bf16, recording what was asked.
struct Machine {
  PrecisionMachine m;
  std::shared_ptr<std::vector<unsigned>> asked = std::make_shared<std::vector<unsigned>>();
  Machine(bool cpuBf16, std::set<unsigned> t4s, bool amx = false) {
    m.cpuHasBf16 = cpuBf16;
    m.cpuHasAmx = amx;
    auto log = asked;
    m.gpuRefusal = [log, t4s](unsigned gpu, DType t) -> std::string {
      log->push_back(gpu);
      if (t != DType::BF16 || !t4s.count(gpu))
        return "";
      return "bf16 needs a GPU of compute capability 8.0 or newer (...); GPU " +
             std::to_string(gpu) + " (Tesla T4) has 7.5";
    };
  }
};

/// --emulate without a GPU: gpu:K runs as CPU device cpu:K+1.
ExecutorOptions emulated() {
  ExecutorOptions e;
  e.deviceMap = [](DeviceId d) { return d.isGpu() ? DeviceId::cpu(d.index + 1) : d; };
  return e;
}

TEST(PrecisionRuns, Bf16OnGpusAsksEachGpuOnceAndNotTheCpu) {
  auto m = plan(2, Precision::BF16);
  ASSERT_TRUE(m);
  // Every convolution is on a GPU: the host's lack of bf16 instructions
  // does not matter there.
  for (const Node *n : m->main().nodes()) {
    if (isConvolution(n->op())) {
      EXPECT_TRUE(n->assignedDevice() && n->assignedDevice()->isGpu())
          << n->name() << " on " << deviceText(n->assignedDevice());
    }
  }
  Machine good(/*cpuBf16=*/false, /*t4s=*/{});
  EXPECT_EQ(message(checkPrecisionRuns(*m, ExecutorOptions(), good.m)), "ok");
  EXPECT_EQ(std::set<unsigned>(good.asked->begin(), good.asked->end()), (std::set<unsigned>{0, 1}));
  EXPECT_EQ(good.asked->size(), 2u);
  EXPECT_EQ(precisionNote(*m, ExecutorOptions(), Machine(true, {}, /*amx=*/true).m), "");
  // GPU 1 is a T4: refused in one line that names it and a node on it.
  std::string refused = message(checkPrecisionRuns(*m, ExecutorOptions(), Machine(true, {1}).m));
  EXPECT_NE(refused.find("--precision bf16: bf16 needs a GPU of compute capability 8.0"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("GPU 1 (Tesla T4) has 7.5, where the plan puts '"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("(gpu:1); use --precision fp16 there, or fp32"), std::string::npos)
      << refused;
  EXPECT_EQ(refused.find('\n'), std::string::npos);
}

TEST(PrecisionRuns, EveryBf16NodeOfAGpuPlanRunsOnAGpu) {
  // What mixed precision makes of the built-in models (the auxiliary head,
  // synchronized batch norms too) has a GPU kernel for every node that reads
  // or writes bf16: the placer leaves none on the host.
  const bool gpuKernels =
      KernelRegistry::global().find(Op::Conv, DeviceKind::GPU, DType::F32) != nullptr;
  for (llvm::StringRef model : {"small_cnn", "resnet18", "inception_v3"})
    for (BnMode bn : {BnMode::Local, BnMode::Sync}) {
      auto m = plan(2, Precision::BF16, model, bn);
      ASSERT_TRUE(m) << model.str();
      int bf16 = 0;
      for (const Node *n : m->main().nodes()) {
        bool touches = false;
        for (const Value *v : n->operands())
          touches |= v->type().dtype == DType::BF16;
        for (unsigned i = 0; i < n->numResults(); ++i)
          touches |= n->result(i)->type().dtype == DType::BF16;
        if (!touches)
          continue;
        ++bf16;
        EXPECT_TRUE(n->assignedDevice() && n->assignedDevice()->isGpu())
            << model.str() << ": " << n->name() << " (" << opName(n->op()).str() << ") on "
            << deviceText(n->assignedDevice());
        if (gpuKernels) {
          EXPECT_TRUE(KernelRegistry::global().supports(*n, DeviceKind::GPU))
              << model.str() << ": " << n->name();
        }
      }
      EXPECT_GT(bf16, 20) << model.str();
    }
}

TEST(PrecisionRuns, GpusFoldedOntoOnePhysicalGpuAskThatOne) {
  auto m = plan(2, Precision::BF16);
  ASSERT_TRUE(m);
  ExecutorOptions folded;
  folded.physicalGpu = [](DeviceId) { return 0; };
  Machine t4(true, {0, 1});
  std::string refused = message(checkPrecisionRuns(*m, folded, t4.m));
  EXPECT_NE(refused.find("GPU 0 (Tesla T4)"), std::string::npos) << refused;
  EXPECT_EQ(*t4.asked, std::vector<unsigned>{0});
}

TEST(PrecisionRuns, Bf16OnEmulatedGpusAndTheHostNeedsTheCpusBf16) {
  for (int gpus : {0, 2}) {
    auto m = plan(gpus, Precision::BF16);
    ASSERT_TRUE(m);
    ExecutorOptions where = gpus ? emulated() : ExecutorOptions();
    // No GPU runs anything: none is asked, even one that would refuse.
    Machine cpu(/*cpuBf16=*/true, /*t4s=*/{0, 1});
    EXPECT_EQ(message(checkPrecisionRuns(*m, where, cpu.m)), "ok") << gpus;
    EXPECT_TRUE(cpu.asked->empty());
    EXPECT_EQ(message(checkPrecisionRuns(*m, where, Machine(false, {}).m)),
              "--precision bf16: this CPU has no bf16 instructions (AVX512_BF16 or AMX) that "
              "oneDNN may use here, so bf16 would run slower than fp32; use --precision fp32")
        << gpus;
    // AMX, where the convolutions run on the CPU: a note that channels-last there is
    // unmeasured, or, with the activations kept blocked, that fp32 is likely faster.
    std::string note = precisionNote(*m, where, Machine(true, {}, /*amx=*/true).m);
    EXPECT_NE(note.find("kept channels-last"), std::string::npos) << gpus << note;
    EXPECT_NE(note.find("no run has measured"), std::string::npos) << gpus << note;
    ExecutorOptions blocked = where;
    blocked.cpuLayout = CpuLayout::Blocked;
    note = precisionNote(*m, blocked, Machine(true, {}, /*amx=*/true).m);
    EXPECT_NE(note.find("fp32 is likely faster"), std::string::npos) << gpus << note;
    EXPECT_EQ(precisionNote(*m, where, Machine(true, {}, /*amx=*/false).m), "") << gpus;
  }
}

TEST(PrecisionRuns, Fp16ConvolutionsRunOnGpusRealOrEmulated) {
  Machine any(false, {0, 1});
  auto placed = plan(2, Precision::FP16);
  ASSERT_TRUE(placed);
  EXPECT_EQ(message(checkPrecisionRuns(*placed, ExecutorOptions(), any.m)), "ok");
  EXPECT_EQ(message(checkPrecisionRuns(*placed, emulated(), any.m)), "ok");
  auto host = plan(0, Precision::FP16);
  ASSERT_TRUE(host);
  std::string refused = message(checkPrecisionRuns(*host, ExecutorOptions(), any.m));
  EXPECT_NE(refused.find("--precision fp16 runs on GPUs"), std::string::npos) << refused;
  EXPECT_TRUE(any.asked->empty());
  // fp32 asks nothing.
  auto f32 = plan(2, Precision::FP32);
  ASSERT_TRUE(f32);
  EXPECT_EQ(message(checkPrecisionRuns(*f32, ExecutorOptions(), Machine(false, {0, 1}).m)), "ok");
}

} // namespace
