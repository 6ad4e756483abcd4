// Costs of whole training graphs: a built-in model through the default
// training pipeline (training-mode, add-loss, autodiff, add-optimizer). Every
// node of the result has a cost rule; the conv gradients cost what the
// forward convs cost; the optimizer touches every parameter once.

#include "frontend/models/Models.h"
#include "ir/ModelSummary.h"
#include "passes/Pass.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

struct Trained {
  std::unique_ptr<Module> forward, training;
};

Trained train(llvm::StringRef model, int64_t batch) {
  Trained t;
  for (auto *slot : {&t.forward, &t.training}) {
    auto m = models::buildModel(model, {.batch = batch});
    if (!m) {
      ADD_FAILURE() << llvm::toString(m.takeError());
      return {};
    }
    *slot = std::move(*m);
  }
  CompileOptions opts;
  opts.batch = batch;
  opts.optimizer = "momentum";
  PassManager pm(opts);
  if (auto e = pm.addPipeline(kDefaultTrainingPipeline)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  if (auto e = pm.run(*t.training)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return {};
  }
  return t;
}

int64_t macsOf(Module &m, Op op, int64_t batch) {
  int64_t macs = 0;
  for (const Node *n : m.main().nodes())
    if (n->op() == op)
      macs += nodeCost(*n, batch).macs;
  return macs;
}

} // namespace

TEST(TrainingCost, ConvGradientsCostTheForwardMacs) {
  const int64_t batch = 4;
  for (const char *model : {"small_cnn", "resnet18"}) {
    SCOPED_TRACE(model);
    Trained t = train(model, batch);
    ASSERT_TRUE(t.training);

    int64_t conv = macsOf(*t.forward, Op::Conv, batch);
    // The first conv reads the images, which need no gradient.
    int64_t firstConv = 0;
    for (const Node *n : t.forward->main().nodes())
      if (n->op() == Op::Conv && n->operand(0)->producer()->op() == Op::Input)
        firstConv += nodeCost(*n, batch).macs;
    ASSERT_GT(firstConv, 0);
    EXPECT_EQ(macsOf(*t.training, Op::Conv, batch), conv);
    EXPECT_EQ(macsOf(*t.training, Op::ConvGradFilter, batch), conv);
    EXPECT_EQ(macsOf(*t.training, Op::ConvGradData, batch), conv - firstConv);

    ModelSummary fwd = summarize(*t.forward), trn = summarize(*t.training);
    EXPECT_EQ(trn.batch, batch);
    double ratio = (double)trn.total.macs / (double)fwd.total.macs;
    EXPECT_GT(ratio, 2.5) << "backward is about twice the forward";
    EXPECT_LE(ratio, 3.0);

    // Momentum: one slot per parameter, each updated once per step.
    EXPECT_EQ(trn.slots.elements, trn.params.elements);
    int64_t updateFlops = 0;
    for (const OpSummary &row : trn.ops)
      if (row.op == Op::ApplyMomentum)
        updateFlops = row.cost.flops;
    EXPECT_EQ(updateFlops, 4 * trn.params.elements);
    // Training keeps more alive than inference: activations wait for backward.
    EXPECT_GT(trn.peakLiveBytes, fwd.peakLiveBytes);
  }
}
