//===- PipelineStrategyTest.cpp - --strategy pipeline, without the CLI ---===//
//
// The plan's shape (stages on their GPUs, edges forward in the forward pass
// and back in the backward pass, variables on their stage, all-reduces
// between pipelines only), the cut and the schedule's bubble against the
// theory's (S-1)/(M+S-1), and every refusal's words. Training against one
// device is tests/tools/PipelineTrainingTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "ClusterFile.h"
#include "StrategyTestUtil.h"

#include "passes/PipelineStages.h"
#include "passes/Recompute.h"
#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/CompiledModule.h"
#include "passes/strategy/PipelineStrategy.h"
#include "placement/analysis/MemoryNeeds.h"
#include "placement/analysis/PipelineBubble.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

using namespace graphc;
using namespace graphc::strategytest;
using graphc::testcluster::ClusterFile;

namespace {

PlacementRequest pipelineOn(int gpus, std::optional<int> stages = {}) {
  PlacementRequest place;
  place.gpus = gpus;
  place.strategy = Strategy::Pipeline;
  place.stages = stages;
  return place;
}

CompileRequest micro(unsigned microBatches, int64_t batch = 16) {
  CompileRequest req = request(batch);
  req.options.pipeline.microBatches = microBatches;
  return req;
}

/// The GPU index `n` runs on (-1: not a GPU).
int gpuOf(const Node &n) {
  std::optional<DeviceId> d = n.assignedDevice();
  return d && d->isGpu() ? (int)d->index : -1;
}

/// The node whose value `v` is, through a Transfer.
const Node *origin(const Value *v) {
  const Node *p = v->producer();
  return p->op() == Op::Transfer ? p->operand(0)->producer() : p;
}

TEST(PipelineStrategy, CutsOneReplicaIntoStagesThatOnlyPassForwardThenBack) {
  auto forward = model("small_cnn");
  const PlacementRequest place = pipelineOn(4);
  auto strategy = strategyFor(micro(2), place);
  ASSERT_TRUE(bool(strategy)) << errorOf(strategy);
  EXPECT_EQ((*strategy)->name(), "pipeline");
  auto plan = (*strategy)->compile(*forward, micro(2), place);
  ASSERT_TRUE(bool(plan)) << errorOf(plan);
  const PlanInfo &info = (*plan)->plan();
  EXPECT_EQ(info.strategy, Strategy::Pipeline);
  EXPECT_EQ(info.towerBatches, (Ints{8, 8}));
  EXPECT_TRUE(everyNodePlaced(**plan));
  EXPECT_EQ(info.pipelineStages, 4);
  EXPECT_EQ(info.microBatches, 2);
  EXPECT_EQ(info.pipelines, 1);
  EXPECT_EQ(info.pipelineSchedule, PipelineSchedule::OneFOneB);
  std::optional<PipelineShape> shape = pipelineShape(**plan);
  ASSERT_TRUE(shape);
  EXPECT_EQ(shape->stages * shape->microBatches * shape->pipelines, 8u);
  auto stages = llvm::json::parse(info.pipeline.value_or(""));
  ASSERT_TRUE(bool(stages)) << llvm::toString(stages.takeError());
  ASSERT_TRUE(stages->getAsArray());
  EXPECT_EQ(stages->getAsArray()->size(), 4u);
  EXPECT_NE(describePipeline(**plan).find("4 stages x 2 micro-batches (1f1b), 1 pipeline"),
            std::string::npos)
      << describePipeline(**plan);

  const Graph &g = (*plan)->main();
  const llvm::DenseSet<const Node *> backward = backwardNodes(g);
  std::set<int> used;
  for (const Node *n : g.nodes()) {
    if (n->tower() < 0 || n->op() == Op::Transfer)
      continue;
    ASSERT_GE(gpuOf(*n), 0) << n->name();
    used.insert(gpuOf(*n));
    for (const Value *v : n->operands()) {
      const Node *p = origin(v);
      if (p->tower() != n->tower() || p->op() == Op::Variable || p->op() == Op::Constant)
        continue;
      if (backward.contains(n) && backward.contains(p)) {
        EXPECT_GE(gpuOf(*p), gpuOf(*n)) << p->name() << " -> " << n->name();
      } else if (!backward.contains(p)) {
        EXPECT_LE(gpuOf(*p), gpuOf(*n)) << p->name() << " -> " << n->name();
      }
    }
  }
  EXPECT_EQ(used, (std::set<int>{0, 1, 2, 3}));
  for (const Variable &v : (*plan)->variables()) {
    ASSERT_EQ(v.devices.size(), 1u) << v.name;
    EXPECT_TRUE(v.devices[0].isGpu()) << v.name;
  }
  EXPECT_TRUE(llvm::none_of(g.nodes(), [](const Node *n) { return n->op() == Op::AllReduce; }));
  EXPECT_FALSE(bool(checkPlanFitsCluster(**plan)));
}

TEST(PipelineStrategy, TowersOverPipelinesAllReduceEachStageBetweenThePipelines) {
  auto forward = model("small_cnn");
  auto plan = compilePlan(*forward, micro(2), pipelineOn(4, 2));
  ASSERT_TRUE(bool(plan)) << errorOf(plan);
  EXPECT_EQ((*plan)->plan().towerBatches, (Ints{4, 4, 4, 4}));
  std::set<std::string> groups;
  for (const Node *n : (*plan)->main().nodes())
    if (n->op() == Op::AllReduce) {
      EXPECT_EQ(n->attrs().getInt("nranks"), 2) << n->name();
      const std::string group = n->attrs().getString("group");
      groups.insert(group);
      const int stage = group[6] - '0'; // "stage_<s>/..."
      EXPECT_EQ(gpuOf(*n), stage + 2 * (int)n->attrs().getInt("rank")) << n->name();
    }
  EXPECT_EQ(groups, (std::set<std::string>{"stage_0/grads", "stage_0/state", "stage_1/grads",
                                           "stage_1/state"}));
  for (const Variable &v : (*plan)->variables()) {
    ASSERT_EQ(v.devices.size(), 2u) << v.name;
    EXPECT_EQ(v.devices[1].index, v.devices[0].index + 2) << v.name;
  }
}

/// The stages' first nodes of a pipeline plan.
std::string cutOf(const Module &plan) {
  std::string cut;
  auto meta = llvm::json::parse(plan.plan().pipeline.value_or(""));
  EXPECT_TRUE(bool(meta));
  if (meta)
    for (const llvm::json::Value &stage : *meta->getAsArray())
      cut += stage.getAsObject()->getString("first").getValueOr("").str() + ";";
  return cut;
}

// inception_v3 75x75, batch 64, 4 stages x 8 micro-batches: cut by time
// alone, a stage overflows GPUs of 150 MiB; cut again with that stage's time
// weighed more, the plan fits.
TEST(PipelineStrategy, AStageThatOverflowsItsGpuIsCutAgainSmaller) {
  auto built = models::buildModel("inception_v3", {0, false, 75});
  ASSERT_TRUE(bool(built)) << errorOf(built);
  ClusterFile roomy(4, 1LL << 30), tight(4, 150LL << 20);
  PlacementRequest place = pipelineOn(0);
  place.clusterFile = roomy.path;
  auto byTime = compilePlan(**built, micro(8, 64), place);
  ASSERT_TRUE(bool(byTime)) << errorOf(byTime);
  place.clusterFile = tight.path;
  auto underMemory = compilePlan(**built, micro(8, 64), place);
  ASSERT_TRUE(bool(underMemory)) << errorOf(underMemory);
  EXPECT_FALSE(bool(checkPlanFitsCluster(**underMemory)));
  EXPECT_NE(cutOf(**byTime), cutOf(**underMemory));
}

unsigned copiesIn(const Module &plan) {
  return (unsigned)llvm::count_if(plan.findGraph("main")->nodes(),
                                  [](const Node *n) { return isRecomputed(*n); });
}

// small_cnn, 2 stages x 4 micro-batches, gpu:0 given 80% of what its stage
// needs with room: no cut fits (the first stage keeps the first convolution's
// activations); --recompute auto drops activations until it fits, each copy
// on its original's GPU and in its micro-batch. With room it changes nothing.
TEST(PipelineStrategy, RecomputeFitsWhatCuttingAgainCannot) {
  auto forward = model("small_cnn");
  PlacementRequest place = pipelineOn(0);
  CompileRequest req = micro(4);
  req.options.recompute.mode = RecomputeMode::Auto;
  ClusterFile roomy(2, 1LL << 30);
  place.clusterFile = roomy.path;
  auto untouched = compilePlan(*forward, req, place);
  ASSERT_TRUE(bool(untouched)) << errorOf(untouched);
  EXPECT_EQ(copiesIn(**untouched), 0u);
  auto needs = memoryNeeds(*runnablePart(**untouched));
  ASSERT_TRUE(bool(needs)) << llvm::toString(needs.takeError());
  auto first = llvm::find_if(*needs, [](const MemoryNeed &n) { return n.device == "gpu:0"; });
  ASSERT_NE(first, needs->end());

  ClusterFile tight(std::vector<int64_t>{first->total() * 8 / 10, 1LL << 30});
  place.clusterFile = tight.path;
  auto cutOnly = compilePlan(*forward, micro(4), place);
  ASSERT_TRUE(bool(cutOnly)) << errorOf(cutOnly);
  llvm::Error overflows = checkPlanFitsCluster(**cutOnly);
  EXPECT_TRUE(bool(overflows)) << "every cut was to leave gpu:0 over its memory";
  llvm::consumeError(std::move(overflows));

  auto recomputed = compilePlan(*forward, req, place);
  ASSERT_TRUE(bool(recomputed)) << errorOf(recomputed);
  EXPECT_FALSE(bool(checkPlanFitsCluster(**recomputed)));
  EXPECT_GT(copiesIn(**recomputed), 0u);
  const Graph &g = (*recomputed)->main();
  for (const Node *n : g.nodes()) {
    if (!isRecomputed(*n))
      continue;
    const Node *original = g.findNode(n->attrs().getString(kRecomputeOf));
    ASSERT_TRUE(original) << n->name();
    EXPECT_EQ(n->assignedDevice(), original->assignedDevice()) << n->name();
    EXPECT_EQ(n->tower(), original->tower()) << n->name();
  }
}

TEST(PipelineStages, TheCutBalancesContiguousRuns) {
  EXPECT_EQ(balancedCuts({1, 1, 1, 1}, 2), (std::vector<size_t>{0, 2, 4}));
  EXPECT_EQ(balancedCuts({5, 1, 1, 1, 1, 1}, 2), (std::vector<size_t>{0, 1, 6}));
  EXPECT_EQ(balancedCuts({1, 2, 3}, 3), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(balancedCuts({4, 1, 1, 1, 1, 4}, 3), (std::vector<size_t>{0, 1, 5, 6}));
  // A stage weighed double takes half as much.
  EXPECT_EQ(balancedCuts({1, 1, 1, 1, 1, 1}, 2, {2, 1}), (std::vector<size_t>{0, 2, 6}));
}

TEST(PipelineStages, TheSchedulesBubbleIsTheTheorys) {
  for (PipelineSchedule schedule : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB})
    for (unsigned S = 1; S <= 4; ++S)
      for (unsigned M = 1; M <= 8; ++M) {
        SCOPED_TRACE(modeName(schedule).str() + " S=" + std::to_string(S) +
                     " M=" + std::to_string(M));
        BlockStarts b = scheduleStarts(schedule, S, M);
        // Every stage is busy 3M units (forward 1, backward 2).
        EXPECT_DOUBLE_EQ(b.end, 3.0 * (M + S - 1));
        EXPECT_NEAR(1 - 3.0 * M / b.end, theoreticalBubble(S, M), 1e-12);
        // In flight on stage s: GPipe all M, 1F1B at most S - s.
        for (unsigned s = 0; s < S; ++s) {
          unsigned most = 0;
          for (unsigned k = 0; k < M; ++k) {
            unsigned live = 0;
            for (unsigned j = 0; j < M; ++j)
              live += b.forward[s][j] <= b.forward[s][k] && b.backward[s][j] > b.forward[s][k];
            most = std::max(most, live);
          }
          EXPECT_EQ(most, schedule == PipelineSchedule::GPipe ? M : std::min(M, S - s));
        }
      }
}

TEST(PipelineStrategy, EveryRefusalSaysWhatToGiveInstead) {
  auto forward = model("small_cnn");
  struct Case {
    const char *what;
    std::function<void(CompileRequest &, PlacementRequest &)> change;
    const char *says;
  };
  const Case cases[] = {
      {"micro-batches that do not divide the batch",
       [](CompileRequest &r, PlacementRequest &) { r.options.pipeline.microBatches = 3; },
       "--micro-batches 3 does not divide the batch 16: the batch must be a multiple of 3 (give "
       "--batch 15 or 18, or --micro-batches dividing 16)"},
      {"nor among pipelines",
       [](CompileRequest &r, PlacementRequest &p) {
         r.options.pipeline.microBatches = 3;
         p.stages = 2;
       },
       "--micro-batches 3 does not divide the batch 16 among 2 pipelines: the batch must be a "
       "multiple of 6 (give --batch 12 or 18, or --micro-batches dividing 8)"},
      {"more stages than GPUs", [](CompileRequest &, PlacementRequest &p) { p.stages = 5; },
       "--stages 5 needs a GPU per stage; the cluster has 4 (give --gpus 5, or --stages 4 or "
       "fewer)"},
      {"GPUs not a multiple of the stages",
       [](CompileRequest &, PlacementRequest &p) { p.stages = 3; },
       "--stages 3 with 4 GPUs: each pipeline takes 3 GPUs, so the GPUs must be a multiple of the "
       "stages (give --gpus 3 or 6)"},
      {"towers", [](CompileRequest &, PlacementRequest &p) { p.towers = 2; },
       "--strategy pipeline makes its own towers (one per micro-batch and pipeline): drop "
       "--towers 2"},
      {"params",
       [](CompileRequest &r, PlacementRequest &) {
         r.options.params = ParamPlacement{ParamPlacement::Mirrored};
       },
       "keeps each variable on its stage's GPU (mirrored between pipelines): drop --params "
       "mirrored"},
      {"accumulate", [](CompileRequest &r, PlacementRequest &) { r.options.accumulate = 2; },
       "instead of --accumulate 2, give --batch 32 --micro-batches 4 (the same samples per update "
       "in one step)"},
      {"bn sync", [](CompileRequest &r, PlacementRequest &) { r.options.bn = BnMode::Sync; },
       "--bn sync would make the micro-batches of a stage, which run one after another on its "
       "GPU, wait for each other; use --bn local"},
      {"loss scaling", [](CompileRequest &r, PlacementRequest &) { r.options.lossScale = 1024; },
       "does not combine with dynamic loss scaling"},
      {"split",
       [](CompileRequest &r, PlacementRequest &) {
         r.options.split = SplitSpec{SplitSpec::Weights, {1, 1}};
       },
       "splits the batch evenly into micro-batches: drop --split"},
      {"ps tasks", [](CompileRequest &, PlacementRequest &p) { p.ps = 1; },
       "runs in one process: several workers, --tasks and --ps are not supported with it"},
      {"workers", [](CompileRequest &, PlacementRequest &p) { p.workers = 2; },
       "runs in one process: several workers, --tasks and --ps are not supported with it"},
      {"shard optimizer",
       [](CompileRequest &r, PlacementRequest &) {
         r.options.params = ParamPlacement{ParamPlacement::Mirrored};
         r.options.shardOptimizer = true;
       },
       "--shard-optimizer shards the optimizer state over data-parallel towers; --strategy "
       "pipeline has none"},
      {"no GPUs", [](CompileRequest &, PlacementRequest &p) { p.gpus = 0; },
       "--strategy pipeline puts its stages on GPUs: give --gpus N or --cluster FILE"},
      {"a --pipeline without aggregate-gradients",
       [](CompileRequest &r, PlacementRequest &) {
         r.pipeline = "bind-batch,training-mode,add-loss,autodiff,add-optimizer,replicate-towers,"
                      "split-batch,concat-outputs,dce,verify";
       },
       "the --pipeline given has no aggregate-gradients"},
  };
  for (const Case &c : cases) {
    CompileRequest req = micro(2);
    PlacementRequest place = pipelineOn(4);
    c.change(req, place);
    auto plan = compilePlan(*forward, req, place);
    const std::string error = errorOf(plan);
    EXPECT_NE(error.find(c.says), std::string::npos) << c.what << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << c.what << ": one line";
  }
}

} // namespace
