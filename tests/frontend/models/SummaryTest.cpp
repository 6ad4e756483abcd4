// Module statistics (ir/ModelSummary.h): variable counts by kind, activation
// bytes, the peak of an in-order schedule, the per-op table and its printers.

#include "frontend/models/Models.h"
#include "ir/Builder.h"
#include "ir/ModelSummary.h"

#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

TensorType f32(std::initializer_list<int64_t> dims) {
  return TensorType(DType::F32, dims);
}

std::unique_ptr<Module> model(llvm::StringRef name, const models::ModelOptions &o = {}) {
  auto m = models::buildModel(name, o);
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  return std::move(*m);
}

} // namespace

// a = Input [N,100] (400 B at batch 1); b = Relu(a); c = Relu(b);
// sum = Add(b, c); d = sum + w (a variable read: not an activation);
// e = Relu(d) is never read.
//   run a:   a               400
//   run b:   a b             800, a dies: 400
//   run c:   b c             800
//   run sum: b c sum        1200, b and c die: 400
//   run d:   sum d           800, sum dies: 400
//   run e:   d e             800, e dies at once: 400
TEST(Summary, PeakLiveBytesOfAnInOrderSchedule) {
  Module m;
  Builder b(m.main());
  Value *a = b.input("a", f32({kBatchDim, 100}));
  Value *rb = b.create(Op::Relu, {a}, {}, "b");
  Value *rc = b.create(Op::Relu, {rb}, {}, "c");
  Variable w;
  w.name = "w";
  w.type = f32({100});
  Value *sum = b.create(Op::Add, {rb, rc}, {}, "sum");
  Value *d = b.create(Op::Add, {sum, b.newVariable(w)}, {}, "d");
  b.create(Op::Relu, {d}, {}, "e");
  m.main().addOutput(d);
  EXPECT_EQ(peakLiveBytes(m.main(), 1), 1200);
  EXPECT_EQ(peakLiveBytes(m.main(), 3), 3600) << "N counts as the given batch";

  ModelSummary s = summarize(m, 1);
  EXPECT_EQ(s.activationBytes, 6 * 400) << "a b c sum d e; the variable read is not counted";
  EXPECT_EQ(s.params.variables, 1);
  EXPECT_EQ(s.params.elements, 100);
  EXPECT_EQ(s.nodes, 7);
}

TEST(Summary, AValueReadTwiceByOneNodeIsFreedOnce) {
  Module m;
  Builder b(m.main());
  Value *a = b.input("a", f32({100}));
  Value *x = b.create(Op::Relu, {a}, {}, "x");
  Value *y = b.create(Op::Add, {x, x}, {}, "y");
  Value *z = b.create(Op::Relu, {y}, {}, "z");
  Value *t = b.create(Op::Relu, {y}, {}, "t");
  m.main().addOutput(b.create(Op::Add, {z, t}, {}, "u"));
  // a 400; x 800 → 400; y 800 → 400 (x freed once); z 800; t 1200 → 800;
  // u 1200. Freeing x twice would end at a peak of 800.
  EXPECT_EQ(peakLiveBytes(m.main(), 1), 1200);
}

TEST(Summary, SmallCnnTotalsAndTable) {
  auto m = model("small_cnn");
  ASSERT_TRUE(m);
  ModelSummary s = summarize(*m, 32);
  EXPECT_EQ(s.batch, 32);
  EXPECT_FALSE(s.batchBound);
  EXPECT_EQ(s.params.elements, 421738);
  EXPECT_EQ(s.params.bytes, 421738 * 4);
  EXPECT_EQ(s.state.variables, 4);
  EXPECT_EQ(s.state.elements, 2 * (32 + 64));
  EXPECT_EQ(s.slots.variables, 0);
  // conv1: 28·28·32 outputs × 9; conv2: 14·14·64 × 288; fc1: 128 × 3136; fc2: 10 × 128.
  int64_t perImage = 28 * 28 * 32 * 9 + 14 * 14 * 64 * 288 + 128 * 3136 + 10 * 128;
  EXPECT_EQ(s.total.macs, 32 * perImage);

  // Sorted by MACs, then FLOPs, then count, then name: Conv, Gemm first.
  ASSERT_GE(s.ops.size(), 2u);
  EXPECT_EQ(s.ops[0].op, Op::Conv);
  EXPECT_EQ(s.ops[0].count, 2);
  EXPECT_EQ(s.ops[1].op, Op::Gemm);
  EXPECT_EQ(s.ops[1].count, 2);
  int64_t macs = 0, nodes = 0;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    macs += s.ops[i].cost.macs;
    nodes += s.ops[i].count;
    if (i) {
      EXPECT_GE(s.ops[i - 1].cost.macs, s.ops[i].cost.macs);
    }
  }
  EXPECT_EQ(macs, s.total.macs);
  EXPECT_EQ(nodes, s.nodes);

  // A bound module is counted at its own batch.
  auto bound = model("small_cnn", {.batch = 16});
  ASSERT_TRUE(bound);
  ModelSummary sb = summarize(*bound, 3);
  EXPECT_EQ(sb.batch, 16);
  EXPECT_TRUE(sb.batchBound);
  EXPECT_EQ(sb.total.macs, 16 * perImage);
}

TEST(Summary, TextReportNamesTheNumbers) {
  auto m = model("inception_v3");
  ASSERT_TRUE(m);
  std::string text;
  llvm::raw_string_ostream os(text);
  printSummary(*m, 1, os);
  EXPECT_NE(text.find("model inception_v3, batch 1 (the symbolic batch N counted as 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("23,834,568"), std::string::npos) << text;
  EXPECT_NE(text.find("5.713 G"), std::string::npos) << text;
  EXPECT_NE(text.find("  Conv "), std::string::npos) << text;
}

TEST(Summary, JsonReportCarriesExactIntegers) {
  auto m = model("resnet18");
  ASSERT_TRUE(m);
  std::string text;
  llvm::raw_string_ostream os(text);
  printSummaryJson(*m, 2, os);
  auto json = llvm::json::parse(text);
  ASSERT_TRUE(bool(json)) << llvm::toString(json.takeError());
  const llvm::json::Object *o = json->getAsObject();
  ASSERT_TRUE(o);
  ModelSummary s = summarize(*m, 2);
  EXPECT_EQ(o->getString("model").getValueOr(""), "resnet18");
  EXPECT_EQ(o->getInteger("batch").getValueOr(0), 2);
  EXPECT_EQ(o->getInteger("macs").getValueOr(0), s.total.macs);
  EXPECT_EQ(o->getInteger("peak_live_bytes").getValueOr(0), s.peakLiveBytes);
  EXPECT_EQ(o->getObject("parameters")->getInteger("elements").getValueOr(0), 11689512);
  const llvm::json::Array *ops = o->getArray("ops");
  ASSERT_TRUE(ops);
  ASSERT_EQ(ops->size(), s.ops.size());
  const llvm::json::Object *first = (*ops)[0].getAsObject();
  EXPECT_EQ(first->getString("op").getValueOr(""), "Conv");
  EXPECT_GT(*first->getNumber("mac_share"), 0.99);
}
