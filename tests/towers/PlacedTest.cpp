//===- PlacedTest.cpp - Towers placed by the real placer still train alike --===//
//
// The equivalence tests place with a stand-in (assigned = requested); this
// one runs the whole compile a user gets, place-devices with the placer over
// a cluster of the host and N GPUs and insert-transfers, and checks that the
// towers still end where one device ends.
//
//===----------------------------------------------------------------------===//

#include "TowerTestUtil.h"

#include "placement/Placer.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

struct Case {
  std::string model, params, bn;
  int towers;
  int64_t batch;
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << c.model << ", " << c.towers << " towers, batch " << c.batch << ", params " << c.params
      << ", bn " << c.bn;
}

models::ModelOptions small(const std::string &model) {
  models::ModelOptions o;
  o.imageSize = 8;
  if (model == "mlp")
    o.hiddenSizes = {32, 16};
  else
    o.dropout = 0;
  return o;
}

class Placed : public testing::TestWithParam<Case> {};

TEST_P(Placed, TrainsLikeOneDevice) {
  const Case &c = GetParam();
  auto single = buildOrFail(c.model, small(c.model));
  auto towers = buildOrFail(c.model, small(c.model));
  ASSERT_TRUE(single && towers);
  CompileOptions o;
  o.batch = c.batch;
  ASSERT_FALSE(bool(runPipeline(*single, kSingleDevicePipeline, o)));

  o.towers = c.towers;
  o.params = cantFail(parseParamPlacement(c.params));
  o.bn = cantFail(parseBnMode(c.bn));
  o.bucketBytes = 4 << 10;
  o.placer = makePlacerFunction(Cluster::defaultCluster(c.towers), anyKernelAnywhere);
  llvm::Error e = runPipeline(
      *towers, std::string(kTowerPipeline) + ",place-devices,insert-transfers,verify", o);
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  for (Node *n : towers->main().nodes())
    if (n->requestedDevice()) {
      EXPECT_EQ(n->assignedDevice(), n->requestedDevice()) << n->name();
    }

  Batch b = randomBatch(single->main().findInput("input")->result()->type(), 10, 9);
  std::map<std::string, Tensor> want, got;
  for (auto [m, out] : {std::pair{single.get(), &want}, std::pair{towers.get(), &got}}) {
    auto ex = makeExecutor(*m);
    ASSERT_TRUE(ex);
    auto r = train(*ex, b, 4, 0.02f);
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    *out = variables(*ex);
  }
  // The towers group the step's sums otherwise: the rounding bound of its
  // longest sum (tests/common/SumBound.h).
  expectWithinBound(got, want, stepBound(c.model, small(c.model), c.batch), c.model + " placed");
}

INSTANTIATE_TEST_SUITE_P(Towers, Placed,
                         testing::Values(Case{"mlp", "cpu", "local", 3, 7},
                                         Case{"mlp", "mirrored", "local", 4, 3},
                                         Case{"small_cnn_nobn", "spread", "local", 2, 6},
                                         Case{"small_cnn", "mirrored", "sync", 3, 8},
                                         Case{"small_cnn", "gpu:1", "sync", 2, 5}),
                         [](const testing::TestParamInfo<Case> &info) {
                           const Case &c = info.param;
                           std::string p = c.params == "gpu:1" ? "gpu1" : c.params;
                           return c.model + "_" + p + "_" + c.bn + "_N" + std::to_string(c.towers);
                         });

} // namespace
