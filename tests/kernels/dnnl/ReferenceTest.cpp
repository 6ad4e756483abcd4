//===- ReferenceTest.cpp - oneDNN kernels against PyTorch ------------------===//
//
// make_reference.py (run once per test run by the ctest fixture
// dnnl_reference_data) writes cases as .npy files and a manifest; each test
// here runs every case of one op family through the node's CPU kernel and
// compares with PyTorch's float64 result.
//
// Tolerance: the rounding bound of each case's sums, K·u relative, floored by
// the expected tensor's RMS (see near()), K the terms one result sums
// (sumLength, ir/Cost.h), plus the transforms' growth times u where a
// Winograd ran (kernelBound): oneDNN and our Winograd sum in float32 in
// orders of their own (blocked channels, per-thread partial sums in the
// weight gradient, vector widths), PyTorch's float64 hardly rounds. The
// worst errors measured, and their share of the bound, are printed.
//
//===----------------------------------------------------------------------===//

#include "tests/kernels/dnnl/DnnlTestUtil.h"

#include "SumBound.h"
#include "ir/Diagnostics.h"
#include "ir/Npy.h"
#include "kernels/cpu/BlockedLayout.h"
#include "kernels/cpu/CpuBackend.h"
#include "kernels/cpu/Winograd1d.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstdio>

using namespace graphc;
using namespace graphc::test;

namespace {

struct Case {
  std::string name;
  Op op = Op::Identity;
  Attrs attrs;
  std::vector<Tensor> inputs, outputs;
};

llvm::Expected<Attribute> readAttr(const llvm::json::Value &v) {
  const llvm::json::Object *o = v.getAsObject();
  if (o && o->getInteger("int"))
    return Attribute(*o->getInteger("int"));
  if (o && o->getNumber("float"))
    return Attribute(*o->getNumber("float"));
  if (o && o->getArray("ints")) {
    Ints ints;
    for (const llvm::json::Value &e : *o->getArray("ints"))
      ints.push_back(*e.getAsInteger());
    return Attribute(ints);
  }
  return makeError("unknown attribute form");
}

llvm::Expected<std::vector<Case>> loadCases() {
  std::string dir = DNNL_REFERENCE_DIR;
  auto text = llvm::MemoryBuffer::getFile(dir + "/manifest.json");
  if (!text)
    return makeError("cannot read " + dir +
                     "/manifest.json; run the test through ctest (the fixture "
                     "dnnl_reference_data writes it)");
  auto json = llvm::json::parse((*text)->getBuffer());
  if (!json)
    return json.takeError();
  std::vector<Case> cases;
  for (const llvm::json::Value &c : *json->getAsObject()->getArray("cases")) {
    const llvm::json::Object &o = *c.getAsObject();
    Case k;
    k.name = o.getString("name")->str();
    auto op = parseOp(*o.getString("op"));
    if (!op)
      return makeError("unknown op in case " + k.name);
    k.op = *op;
    for (const auto &[name, value] : *o.getObject("attrs")) {
      auto a = readAttr(value);
      if (!a)
        return a.takeError();
      k.attrs.set(name.str(), *a);
    }
    for (auto [key, list] : {std::pair{"inputs", &k.inputs}, std::pair{"outputs", &k.outputs}})
      for (const llvm::json::Value &f : *o.getArray(key)) {
        auto t = readNpy(dir + "/" + f.getAsString()->str());
        if (!t)
          return t.takeError();
        list->push_back(*t);
      }
    cases.push_back(std::move(k));
  }
  return cases;
}

const std::vector<Case> &allCases() {
  static std::vector<Case> cases = [] {
    auto c = loadCases();
    if (!c) {
      ADD_FAILURE() << llvm::toString(c.takeError());
      return std::vector<Case>();
    }
    return std::move(*c);
  }();
  return cases;
}

/// Runs every case whose op is in `ops`; prints the worst error per op.
/// Returns how many of them ran an implementation whose name contains
/// `marker` (a Winograd convolution: oneDNN's or our own 1-D one).
int checkFamily(std::initializer_list<Op> ops, ConvAlgorithm algorithm = ConvAlgorithm::Auto,
                llvm::StringRef marker = "wino") {
  int winograd = 0;
  const std::vector<Case> &cases = allCases();
  EXPECT_FALSE(cases.empty()) << "no reference cases";
  for (Op op : ops) {
    int count = 0;
    double worst = 0, worstBound = 0;
    std::string worstCase;
    for (const Case &c : cases) {
      if (c.op != op)
        continue;
      ++count;
      SCOPED_TRACE(c.name);
      std::vector<TensorType> types;
      for (const Tensor &t : c.inputs)
        types.push_back(t.type());
      auto node = mustMakeNode(c.op, types, c.attrs);
      if (!node)
        return winograd;
      std::vector<PrimitiveInfo> ran;
      std::vector<Tensor> got = runOnce(*node->node, c.inputs, algorithm, ran);
      winograd += llvm::any_of(ran, [&](const PrimitiveInfo &p) {
        return llvm::StringRef(p.implementation).contains(marker);
      });
      EXPECT_EQ(got.size(), c.outputs.size());
      if (got.size() != c.outputs.size())
        continue;
      const double bound = kernelBound(*node->node, ran, 1);
      for (size_t i = 0; i < got.size(); ++i) {
        double err = 0;
        // A scalar result (1-d by 1-d MatMul) was saved by NumPy as shape ().
        Tensor want = c.outputs[i].reshaped(got[i].shape());
        EXPECT_TRUE(near(got[i], want, bound, &err)) << "result " << i;
        if (err / bound > (worstBound ? worst / worstBound : 0)) {
          worst = err;
          worstBound = bound;
          worstCase = c.name;
        }
      }
    }
    EXPECT_GT(count, 0) << "no cases for " << opName(op).str();
    std::printf("[ reference] %-20s %2d cases, worst normalized error %.2e (%s)\n",
                opName(op).str().c_str(), count, worst, worstCase.c_str());
    sumbound::report(opName(op).str() + " against PyTorch (" + worstCase + ")", worst, worstBound);
  }
  return winograd;
}

TEST(DnnlReference, Conv) {
  int ours = checkFamily({Op::Conv, Op::ConvGradData, Op::ConvGradFilter}, ConvAlgorithm::Auto,
                         "graphc_wino1d");
  // conv_1x7, conv_7x1_17, conv_1x7_17, conv_1x7_short, conv_3x1_8x8 and
  // conv_1x3_8x8 by our 1-D Winograd, three directions each.
  if (wino1d::kernelsFor(channelBlock())) {
    EXPECT_EQ(ours, 18);
  }
}

// The 1xK / Kx1 cases and conv_5x5 by our own F(4, K) where asked, conv_1x5
// too, on AVX2 and AVX-512 alike: at least those 8 cases' three directions
// (more where oneDNN has no Winograd and ours takes the 3x3 cases too).
TEST(DnnlReference, ConvWinograd1d) {
  int ours = checkFamily({Op::Conv, Op::ConvGradData, Op::ConvGradFilter}, ConvAlgorithm::Winograd,
                         "graphc_wino1d");
  if (!wino1d::kernelsFor(channelBlock()))
    GTEST_SKIP() << "no vector code for the 1-D Winograd on this CPU; the cases ran directly";
  EXPECT_GE(ours, 24);
}

// Every case with Winograd wherever oneDNN has it (f32 3x3 stride-1
// convolutions on AVX-512: odd sizes, partial tiles, no padding), at the same
// tolerance. Elsewhere our own Winograd takes the 3x3 cases where asked
// (DnnlReference.ConvWinograd1d counts those) and this test says so.
TEST(DnnlReference, ConvWinograd) {
  int winograd =
      checkFamily({Op::Conv, Op::ConvGradData, Op::ConvGradFilter}, ConvAlgorithm::Winograd);
  if (!cpuHasWinograd())
    GTEST_SKIP() << "oneDNN has no Winograd convolution on this CPU; the cases ran directly";
  // conv_larger and the conv_wino_* cases, three directions each.
  EXPECT_GE(winograd, 12);
}

TEST(DnnlReference, Pool) {
  checkFamily(
      {Op::MaxPool, Op::MaxPoolGrad, Op::AveragePool, Op::AveragePoolGrad, Op::GlobalAveragePool});
}

TEST(DnnlReference, BatchNorm) {
  checkFamily({Op::BatchNorm, Op::BatchNormTrain, Op::BatchNormTrainGrad});
}

TEST(DnnlReference, MatMul) {
  checkFamily({Op::MatMul, Op::Gemm});
}

} // namespace
