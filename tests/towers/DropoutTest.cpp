//===- DropoutTest.cpp - Per-tower random streams ---------------------------===//
//
// Same seed, same devices: the same masks and the same training result.
// Towers draw different masks (the stream is keyed by the node name without
// its tower prefix, the tower and the step), steps draw different masks, and
// another seed draws other masks. A per-sample mask (stochastic depth)
// follows each tower's share of the batch and is drawn per tower too.
//
//===----------------------------------------------------------------------===//

#include "TowerTestUtil.h"

#include "passes/TowerReplication.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

struct MaskRun {
  std::vector<Tensor> masks; ///< per tower, the last step's
  std::map<std::string, Tensor> variables;
};

/// small_cnn_nobn with dropout 0.5 trained by `towers` towers; `mask` is
/// the Dropout's mask kind (ir/DropoutMask.h; "": per element).
std::unique_ptr<Module> compiledCnn(int towers, llvm::StringRef mask = "", int64_t batch = 8) {
  models::ModelOptions mo;
  mo.imageSize = 8;
  mo.dropout = 0.5;
  auto m = buildOrFail("small_cnn_nobn", mo);
  if (!m)
    return nullptr;
  if (!mask.empty())
    for (Node *n : m->main().nodes())
      if (n->op() == Op::Dropout)
        n->attrs().set("mask", mask.str());
  CompileOptions o;
  o.towers = towers;
  o.batch = batch;
  o.params = cantFail(parseParamPlacement("mirrored"));
  if (auto e = compileTowers(*m, o)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  // Return every tower's mask.
  Graph &g = m->main();
  std::vector<Value *> masks;
  for (Node *n : g.nodes())
    if (n->op() == Op::DropoutTrain)
      masks.push_back(n->result(1));
  EXPECT_EQ(masks.size(), (size_t)towers);
  for (Value *v : masks)
    g.addOutput(v);
  return m;
}

MaskRun train(Module &m, uint64_t seed, int steps) {
  MaskRun r;
  auto ex = makeExecutor(m, seed);
  if (!ex)
    return r;
  Batch b = randomBatch(m.main().findInput("input")->result()->type(), 10, 5);
  auto out = towertest::train(*ex, b, steps);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return r;
  }
  r.masks.assign(out->begin() + 2, out->end());
  r.variables = variables(*ex);
  return r;
}

double zeroFraction(const Tensor &mask) {
  int64_t zeros = 0;
  for (int64_t i = 0; i < mask.numElements(); ++i)
    zeros += mask.at(i) == 0;
  return (double)zeros / (double)mask.numElements();
}

TEST(Dropout, SameSeedSameMasksAndSameTraining) {
  auto m = compiledCnn(2);
  ASSERT_TRUE(m);
  MaskRun a = train(*m, 11, 3), b = train(*m, 11, 3);
  ASSERT_EQ(a.masks.size(), 2u);
  ASSERT_EQ(b.masks.size(), 2u);
  for (size_t t = 0; t < 2; ++t)
    EXPECT_EQ(a.masks[t], b.masks[t]) << "tower " << t;
  expectSameBits(a.variables, b.variables, "rerun with the same seed");
}

TEST(Dropout, TowersDrawTheirOwnMasks) {
  auto m = compiledCnn(2);
  ASSERT_TRUE(m);
  MaskRun r = train(*m, 11, 1);
  ASSERT_EQ(r.masks.size(), 2u);
  ASSERT_EQ(r.masks[0].type(), r.masks[1].type());
  EXPECT_NE(r.masks[0], r.masks[1]);
  for (const Tensor &mask : r.masks) {
    EXPECT_NEAR(zeroFraction(mask), 0.5, 0.1);
    for (int64_t i = 0; i < mask.numElements(); ++i)
      ASSERT_TRUE(mask.at(i) == 0 || mask.at(i) == 2) << mask.at(i);
  }
}

TEST(Dropout, StepsAndSeedsDrawOtherMasks) {
  auto m = compiledCnn(2);
  ASSERT_TRUE(m);
  MaskRun one = train(*m, 11, 1), two = train(*m, 11, 2), other = train(*m, 12, 1);
  ASSERT_EQ(one.masks.size(), 2u);
  ASSERT_EQ(two.masks.size(), 2u);
  ASSERT_EQ(other.masks.size(), 2u);
  EXPECT_NE(one.masks[0], two.masks[0]) << "step 1 draws anew";
  EXPECT_NE(one.masks[0], other.masks[0]) << "another seed draws anew";
}

TEST(Dropout, MasksAreKeyedByTheNameWithoutTheTowerPrefix) {
  auto m = compiledCnn(2);
  ASSERT_TRUE(m);
  for (Node *n : m->main().nodes())
    if (n->op() == Op::DropoutTrain) {
      EXPECT_EQ(stripTowerPrefix(n->name()), "dropout") << n->name();
      EXPECT_EQ(n->name(), towerPrefix(n->tower()) + "dropout");
    }
}

TEST(Dropout, PerSampleMasksFollowEachTowersShareOfTheBatch) {
  auto m = compiledCnn(2, "sample", 16);
  ASSERT_TRUE(m);
  MaskRun r = train(*m, 11, 2);
  ASSERT_EQ(r.masks.size(), 2u);
  for (const Tensor &mask : r.masks) {
    ASSERT_EQ(mask.type().shape[0], 8) << "each tower's 8 samples";
    EXPECT_EQ(mask.numElements(), 8) << "one value per sample";
    for (int64_t i = 0; i < mask.numElements(); ++i)
      ASSERT_TRUE(mask.at(i) == 0 || mask.at(i) == 2) << mask.at(i);
  }
  // Two towers' 8 fair coins agree with probability 2^-8; the seed is fixed.
  EXPECT_NE(r.masks[0], r.masks[1]);
  MaskRun again = train(*m, 11, 2);
  ASSERT_EQ(again.masks.size(), 2u);
  EXPECT_EQ(r.masks[0], again.masks[0]);
  expectSameBits(r.variables, again.variables, "rerun with the same seed");
}

} // namespace
