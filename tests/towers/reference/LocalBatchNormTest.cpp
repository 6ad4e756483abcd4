//===- LocalBatchNormTest.cpp - Per-tower BatchNorm against PyTorch ---------===//
//
// --bn local: each tower normalizes its slice with its own batch statistics,
// the towers' gradients add up, and the moving averages become the towers'
// results weighted by sample count. local_bn_reference.py computes the same
// with PyTorch, one model pass per slice (written by a ctest fixture into the
// build directory); here graphc's towers run on emulated devices from the
// same initial state and batch and must end with the same parameters,
// momentum buffers and running statistics, within the rounding bound of the
// step's longest sum (tests/common/SumBound.h): PyTorch and oneDNN both round,
// each in its own order, so twice K·u (K = 8·8·8 = 512 at the largest batch,
// 6.1e-5; it was 2e-5 when set on one CPU's orders).
//
//===----------------------------------------------------------------------===//

#include "../TowerTestUtil.h"

#include "ir/Npy.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace graphc;
using namespace graphc::towertest;

namespace {

constexpr int kSteps = 3;    // local_bn_reference.py STEPS
constexpr float kLr = 0.02f; // LR (momentum 0.9 is graphc's default)

std::string caseDir(llvm::StringRef name) {
  return (llvm::Twine(TOWERS_REFERENCE_DIR) + "/" + name).str();
}

llvm::Expected<std::map<std::string, Tensor>> readAll(const std::string &dir) {
  std::map<std::string, Tensor> out;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef path = it->path();
    if (!path.endswith(".npy"))
      continue;
    auto t = readNpy(path);
    if (!t)
      return t.takeError();
    out[llvm::sys::path::stem(path).str()] = *t;
  }
  if (ec || out.empty())
    return makeError("no reference files in '" + dir +
                     "' (run the ctest fixture "
                     "towers_local_bn_reference)");
  return out;
}

struct Param {
  std::string name, params;
};

void PrintTo(const Param &p, std::ostream *os) {
  *os << p.name << ", params " << p.params;
}

class LocalBatchNorm : public testing::TestWithParam<Param> {};

TEST_P(LocalBatchNorm, TowersMatchPyTorchSliceBySlice) {
  const Param &p = GetParam();
  std::string dir = caseDir(p.name);
  auto sizes = readNpy(dir + "/sizes.npy");
  ASSERT_TRUE(bool(sizes)) << llvm::toString(sizes.takeError());
  auto x = readNpy(dir + "/input.npy");
  ASSERT_TRUE(bool(x)) << llvm::toString(x.takeError());
  auto labels = readNpy(dir + "/labels.npy");
  ASSERT_TRUE(bool(labels)) << llvm::toString(labels.takeError());
  auto initial = readAll(dir + "/initial");
  ASSERT_TRUE(bool(initial)) << llvm::toString(initial.takeError());
  auto want = readAll(dir + "/final");
  ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());

  models::ModelOptions mo;
  mo.imageSize = 8;
  mo.dropout = 0;
  auto m = buildOrFail("small_cnn", mo);
  ASSERT_TRUE(m);
  CompileOptions o;
  o.towers = (int)sizes->numElements();
  o.batch = x->shape()[0];
  o.bn = cantFail(parseBnMode("local"));
  o.params = cantFail(parseParamPlacement(p.params));
  llvm::Error err = compileTowers(*m, o);
  ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
  Ints planned = m->plan().towerBatches.value_or(Ints{});
  for (int64_t t = 0; t < sizes->numElements(); ++t)
    ASSERT_EQ(planned[t], (int64_t)sizes->at(t)) << "tower " << t << " slices differently";

  auto ex = makeExecutor(*m);
  ASSERT_TRUE(ex);
  for (const auto &[name, value] : *initial) {
    llvm::Error w = ex->writeVariable(name, value);
    ASSERT_FALSE(bool(w)) << llvm::toString(std::move(w));
  }
  auto out = train(*ex, {*x, *labels}, kSteps, kLr);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  expectWithinBound(variables(*ex), *want, 2 * stepBound("small_cnn", mo, o.batch),
                    p.name + ", params " + p.params);
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (const char *name : {"two_even", "three_uneven", "four_with_empty"})
    for (const char *mode : {"cpu", "mirrored", "spread"})
      out.push_back({name, mode});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Towers, LocalBatchNorm, testing::ValuesIn(params()),
                         [](const testing::TestParamInfo<Param> &info) {
                           return info.param.name + "_" + info.param.params;
                         });

} // namespace
