//===- StochasticDepthTest.cpp - Random ops imported as per-sample Dropout -===//
//
// make_models.py's stochastic-depth models: every form PyTorch exports
// (torchvision's modes "row" and "batch", rand_like of a slice, timm's floor
// form, torch.bernoulli as PyTorch 1.13 writes it, ONNX Bernoulli) imports as
// one Dropout {ratio = 1 - keep, training, mask}, exports and imports back,
// trains with per-sample masks, and every other use of a random op is
// refused in one line naming the node.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "frontend/onnx/OnnxExporter.h"

#include "ir/DropoutMask.h"
#include "passes/TrainingMode.h"

#include <onnx/onnx_pb.h>

#include <map>

using namespace graphc;
using namespace graphc::testing;

namespace {

struct FormCase {
  const char *file;
  DropoutMask mask;
  double ratio; ///< 1 - keep, as written
};

void PrintTo(const FormCase &c, std::ostream *os) {
  *os << c.file;
}

class StochasticDepthForms : public ::testing::TestWithParam<FormCase> {};

const Node *onlyDropout(const Module &m) {
  const Node *found = nullptr;
  for (const Node *n : m.findGraph("main")->nodes())
    if (n->op() == Op::Dropout) {
      EXPECT_EQ(found, nullptr) << "a second Dropout " << n->name();
      found = n;
    }
  return found;
}

TEST_P(StochasticDepthForms, ImportsAsOneDropoutOfTheResidualBranch) {
  const FormCase &c = GetParam();
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath(c.file)));
  const Node *d = onlyDropout(*m);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->attrs().getFloat("ratio"), c.ratio);
  EXPECT_EQ(d->attrs().getInt("training"), 1);
  EXPECT_EQ(dropoutMaskOf(*d), c.mask);
  // x is the branch: the convolution in PyTorch's blocks, the input in Bernoulli's.
  const Node *x = d->operand(0)->producer();
  EXPECT_TRUE(x->op() == Op::Conv || x->op() == Op::Input) << opName(x->op()).str();
  for (const Node *n : m->findGraph("main")->nodes())
    EXPECT_TRUE(n->op() != Op::Less && n->op() != Op::Cast && n->op() != Op::Div)
        << "left over from the chain: " << n->name();
  expectRoundTrips(*m);
}

TEST_P(StochasticDepthForms, TrainingModeDrawsOneMaskValuePerSample) {
  const FormCase &c = GetParam();
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath(c.file), ImportOptions{.batch = 4}));
  ASSERT_TRUE(bool(applyTrainingMode(*m, {})));
  const Node *d = firstNode(*m, Op::DropoutTrain);
  ASSERT_NE(d, nullptr);
  Dims want = c.mask == DropoutMask::Sample   ? Dims{4, 1, 1, 1}
              : c.mask == DropoutMask::Element ? Dims{4, 3, 4, 4}
                                               : Dims{1, 1, 1, 1};
  EXPECT_EQ(d->result(1)->type().shape, want);
  EXPECT_EQ(d->result(0)->type().shape, (Dims{4, 3, 4, 4}));
}

INSTANTIATE_TEST_SUITE_P(Onnx, StochasticDepthForms,
                         ::testing::Values(FormCase{"sd_row.onnx", DropoutMask::Sample, 0.2},
                                           FormCase{"sd_batch.onnx", DropoutMask::Tensor, 0.2},
                                           FormCase{"sd_like.onnx", DropoutMask::Sample, 0.2},
                                           FormCase{"sd_floor.onnx", DropoutMask::Sample, 0.2},
                                           FormCase{"sd_bernoulli.onnx", DropoutMask::Sample, 0.2},
                                           FormCase{"sd_bernoulli_op.onnx", DropoutMask::Sample,
                                                    0.1},
                                           FormCase{"sd_dropout_dynamo.onnx", DropoutMask::Element,
                                                    0.2}),
                         [](const ::testing::TestParamInfo<FormCase> &info) {
                           std::string name = llvm::StringRef(info.param.file).drop_back(5).str();
                           return name;
                         });

TEST(StochasticDepth, InferenceExportDropsItAndTrainingExportKeepsIt) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("sd_row.onnx")));
  auto countOps = [](llvm::StringRef bytes, llvm::StringRef op) {
    onnx::ModelProto p;
    EXPECT_TRUE(p.ParseFromArray(bytes.data(), (int)bytes.size()));
    return llvm::count_if(p.graph().node(), [&](const auto &n) { return n.op_type() == op; });
  };
  auto inference = exportOnnxBytes(*m, 0, ExportForm::Inference);
  ASSERT_TRUE(bool(inference)) << llvm::toString(inference.takeError());
  EXPECT_EQ(onnxCheckerError(*inference), "");
  EXPECT_EQ(countOps(*inference, "RandomUniformLike"), 0);
  EXPECT_EQ(countOps(*inference, "Dropout"), 0);
  auto training = exportOnnxBytes(*m, 0, ExportForm::Training);
  ASSERT_TRUE(bool(training)) << llvm::toString(training.takeError());
  EXPECT_EQ(countOps(*training, "RandomUniformLike"), 1);
  EXPECT_EQ(countOps(*training, "Dropout"), 0) << "ONNX's Dropout masks elements";
}

/// The ops of `m`'s main graph, and how often each occurs.
std::map<std::string, int> opCounts(const Module &m) {
  std::map<std::string, int> counts;
  for (const Node *n : m.findGraph("main")->nodes())
    ++counts[opName(n->op()).str()];
  return counts;
}

TEST(StochasticDepth, AnExpandOnlyTheDrawsReadGoesWithThem) {
  // PyTorch 2's dynamo exporter: one Expand of x's shape for every draw.
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("sd_shared_noise.onnx")));
  auto ops = opCounts(*m);
  EXPECT_EQ(ops["Dropout"], 2);
  EXPECT_EQ(ops.count("Expand"), 0u);
  EXPECT_EQ(m->findVariable("zero_f"), nullptr) << "only the absorbed Expand reads it as data";
}

TEST(StochasticDepth, AnExpandTheModelReadsTooStays) {
  ASSERT_OK_AND_ASSIGN(m, importOnnxFile(modelPath("sd_shared_noise_read.onnx")));
  auto ops = opCounts(*m);
  EXPECT_EQ(ops["Dropout"], 2);
  EXPECT_EQ(ops["Expand"], 1);
}

//===-- Refusals -----------------------------------------------------------===//

const char *const kForms =
    "graphc imports random ops only as stochastic depth, x * noise with noise "
    "Cast(RandomUniform[Like] < keep) / keep, Floor(keep + RandomUniform[Like]) / keep or "
    "Bernoulli(keep) / keep, drawn once per sample ([N,1,...,1]), once for the whole tensor "
    "([1,...,1]) or once per element (x's shape: dropout)";

/// `prefix` and the list of forms (appended: GCC 12 warns wrongly about
/// std::string&& + const char*).
std::string withForms(llvm::StringRef prefix) {
  std::string s = prefix.str();
  s.append(kForms);
  return s;
}

TEST(StochasticDepth, AnotherDistributionIsRefusedInOneLine) {
  EXPECT_EQ(importError("sd_normal.onnx"),
            withForms("node 'noise/RandomNormalLike' (RandomNormalLike, opset 17): not part of "
                      "a stochastic-depth pattern (it draws from another distribution than "
                      "uniform [0, 1) or Bernoulli); "));
}

TEST(StochasticDepth, ADrawReadTwiceIsRefused) {
  EXPECT_EQ(importError("sd_read_twice.onnx"),
            withForms("node 'sd/RandomUniformLike' (RandomUniformLike, opset 17): not part of "
                      "a stochastic-depth pattern (the result of RandomUniformLike "
                      "'sd/RandomUniformLike' is read by 2 nodes, not one); "));
}

TEST(StochasticDepth, AnUnscaledMaskIsRefused) {
  EXPECT_EQ(importError("sd_unscaled.onnx"),
            withForms("node 'sd/RandomUniformLike' (RandomUniformLike, opset 17): not part of "
                      "a stochastic-depth pattern (its noise reaches Mul 'sd/Mul' (input 1) "
                      "where Div (noise / keep) should follow); "));
}

TEST(StochasticDepth, ADivisorOtherThanKeepIsRefused) {
  EXPECT_EQ(importError("sd_wrong_divisor.onnx"),
            "node 'sd/RandomUniformLike' (RandomUniformLike, opset 17): stochastic depth divides "
            "by 0.5, not by the keep probability 0.9; graphc imports only the scaled form (x * "
            "mask / keep)");
}

TEST(StochasticDepth, APerChannelNoiseIsRefused) {
  EXPECT_EQ(importError("sd_per_channel.onnx"),
            withForms("node 'sd/RandomUniform' (RandomUniform, opset 17): stochastic depth "
                      "draws a noise of shape [2,3,1,1] for x 'x' f32[2,3,4,4]; "));
}

TEST(StochasticDepth, RandomOpsJoinTheListOfEveryMissingOp) {
  EXPECT_EQ(importError("sd_normal_and_topk.onnx"),
            withForms("'" + modelPath("sd_normal_and_topk.onnx") +
                      "' uses 2 ops that graphc does not import (opset 17): RandomNormalLike "
                      "(node 'noise/RandomNormalLike'); TopK (node 'a/TopK'); "));
}

} // namespace
