// No hot oneDNN primitive of a real training step is a reference
// implementation. oneDNN falls back to its reference (plain C++) code when it
// is handed a format, shape or ISA its optimized kernels lack: a batch norm
// given 16-channel blocks on an AVX2 CPU runs "bnorm_ref", ten to fifty times
// slower, and nothing else says so. The step runs on whatever CPU this is
// (and scripts/test runs it again with ONEDNN_MAX_CPU_ISA=AVX2), in the blocked
// layout and in the channels-last one (--cpu-layout nhwc), then every
// primitive each kernel ran is checked by the implementation name oneDNN
// reports for it.

#include "executor/Executor.h"
#include "frontend/models/Models.h"
#include "ir/Random.h"
#include "kernels/cpu/CpuBackend.h"
#include "kernels/cpu/CpuIsa.h"
#include "passes/strategy/Compile.h"

#include "llvm/ADT/StringSet.h"

#include <gtest/gtest.h>
#include <map>

using namespace graphc;

namespace {

/// The primitive kinds a training step spends its time in.
bool isHot(llvm::StringRef kind) {
  static const llvm::StringSet<> hot{"convolution",    "deconvolution", "batch_normalization",
                                     "pooling",        "pooling_v2",    "eltwise",
                                     "matmul",         "inner_product", "reorder"};
  return hot.contains(kind);
}

/// oneDNN names its reference implementations "ref:any", "bnorm_ref:any",
/// "ref_fused:any", ...
bool isReference(llvm::StringRef implementation) { return implementation.contains("ref"); }

void runOneStep(const char *model, const models::ModelOptions &mo,
                CpuLayout layout = CpuLayout::Auto) {
  auto forward = models::buildModel(model, mo);
  ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
  CompileRequest req;
  req.options.batch = mo.batch;
  req.options.optimizer = "momentum";
  auto m = compileTraining(**forward, req);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ExecutorOptions eo;
  eo.cpuLayout = layout;
  auto ex = Executor::create(**m, eo);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  llvm::StringMap<Tensor> feeds;
  RandomStream rng(7, 1);
  for (Node *in : (*m)->main().inputs()) {
    Tensor t(in->result()->type());
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.set(i, in->name() == "labels" ? (double)(rng.next() % 10)
               : in->name() == "lr"   ? 0.01
                                      : rng.normal());
    feeds[in->name()] = std::move(t);
  }
  auto out = (*ex)->run(feeds);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());

  std::map<std::string, int> census;
  int hot = 0;
  for (const NodePrimitives &np : (*ex)->primitives())
    for (const PrimitiveInfo &p : np.primitives) {
      ++census[p.kind + " " + p.implementation];
      if (!isHot(p.kind))
        continue;
      ++hot;
      EXPECT_FALSE(isReference(p.implementation))
          << "node '" << np.node->name() << "' (" << opName(np.node->op()).str() << ") runs "
          << p.kind << " as oneDNN's reference implementation '" << p.implementation << "'";
    }
  EXPECT_GT(hot, 0) << "no oneDNN primitive ran";
  std::printf("%s: channel block %d, ONEDNN_MAX_CPU_ISA=%s\n", model, channelBlock(),
              std::getenv("ONEDNN_MAX_CPU_ISA") ? std::getenv("ONEDNN_MAX_CPU_ISA") : "(unset)");
  for (const auto &[what, nodes] : census)
    std::printf("  %4d nodes  %s\n", nodes, what.c_str());
}

} // namespace

TEST(HotPrimitives, InceptionV3TrainingStepRunsNoReferenceImplementation) {
  models::ModelOptions mo;
  mo.imageSize = 75;
  mo.batch = 4;
  runOneStep("inception_v3", mo);
}

TEST(HotPrimitives, InceptionV3ChannelsLastStepRunsNoReferenceImplementation) {
  // --cpu-layout nhwc (bf16 on AMX): NHWC convolutions, batch norms and pools.
  models::ModelOptions mo;
  mo.imageSize = 75;
  mo.batch = 4;
  runOneStep("inception_v3", mo, CpuLayout::Nhwc);
}

TEST(HotPrimitives, SmallCnnTrainingStepRunsNoReferenceImplementation) {
  if (cpuIsa() < CpuIsa::Avx2)
    GTEST_SKIP() << "below AVX2 oneDNN runs small_cnn's first convolution (one input channel) "
                    "with its reference implementation: it has no SSE4.1 code for it";
  models::ModelOptions mo;
  mo.batch = 16;
  runOneStep("small_cnn", mo);
}
