//===- RebatchTest.cpp - A bound batch changed into another ----------------===//
//
// passes/Rebatch.h: a module bound to one batch runs at another where its
// graph allows it (the batch folded into another axis k times included), and
// is refused, unchanged, where it would compute another model.
//
//===----------------------------------------------------------------------===//

#include "PassTestUtil.h"

#include "executor/Executor.h"
#include "ir/Builder.h"
#include "ir/Printer.h"
#include "passes/Rebatch.h"

#include "SumBound.h"

#include <gtest/gtest.h>

using namespace graphc;
using passtest::addVariable;
using passtest::randomTensor;

namespace {

Value *reshape(Builder &b, Value *x, Ints shape, const std::string &name) {
  Attrs a;
  a.set("shape", std::move(shape));
  return b.create(Op::Reshape, {x}, std::move(a), name);
}

/// x [4, 2, 6] as [8, 6] (two rows per sample, as attention's [B*heads, ...]),
/// a MatMul, a ReLU, and back to one row per sample [4, 10].
std::unique_ptr<Module> foldedBatch() {
  auto m = std::make_unique<Module>("folded");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {4, 2, 6}));
  Value *w = addVariable(b, "w", {6, 5}, VarKind::Param, {"kaiming_uniform", {2.236}});
  Value *rows = reshape(b, x, {8, 6}, "rows");
  Value *y = b.create(Op::Relu, {b.create(Op::MatMul, {rows, w}, {}, "mm")}, {}, "relu");
  m->main().addOutput(reshape(b, y, {4, 10}, "samples"));
  m->plan().batch = (int64_t)4;
  return m;
}

Tensor run(const Module &m, const Tensor &x) {
  auto ex = Executor::create(m, {});
  if (!ex) {
    ADD_FAILURE() << llvm::toString(ex.takeError());
    return {};
  }
  llvm::StringMap<Tensor> feeds;
  feeds["x"] = x;
  auto out = (*ex)->run(feeds);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return {};
  }
  return (*out)[0];
}

std::string rebatchError(Module &m, int64_t batch) {
  llvm::Error e = rebatch(m, batch);
  if (!e) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(std::move(e));
}

TEST(Rebatch, AFoldedBatchFollowsAndEachSampleComputesAsBefore) {
  auto m = foldedBatch();
  const std::string before = toText(*m);
  auto six = foldedBatch();
  ASSERT_FALSE(bool(rebatch(*six, 6)));
  EXPECT_EQ(six->batch(), std::optional<int64_t>(6));
  EXPECT_EQ(six->main().inputs()[0]->result()->type(), TensorType(DType::F32, {6, 2, 6}));
  EXPECT_EQ(six->main().findNode("rows")->attrs().getInts("shape"), (Ints{12, 6}));
  EXPECT_EQ(six->main().findNode("samples")->attrs().getInts("shape"), (Ints{6, 10}));
  EXPECT_EQ(toText(*m), before);

  // The first four samples of six give what the four alone give.
  Tensor x6 = randomTensor(TensorType(DType::F32, {6, 2, 6}), 7);
  Tensor x4(TensorType(DType::F32, {4, 2, 6}));
  std::copy_n(x6.data<float>(), x4.numElements(), x4.data<float>());
  Tensor y4 = run(*m, x4), y6 = run(*six, x6);
  ASSERT_EQ(y6.type(), TensorType(DType::F32, {6, 10}));
  Tensor head(TensorType(DType::F32, {4, 10}));
  std::copy_n(y6.data<float>(), head.numElements(), head.data<float>());
  EXPECT_TRUE(sumbound::within(head, y4, 2 * sumbound::bound(6 + 4)));

  // And back: rebatching is its own inverse.
  ASSERT_FALSE(bool(rebatch(*six, 4)));
  EXPECT_EQ(toText(*six), before);
}

TEST(Rebatch, APerSampleDropoutMaskFollowsTheBatch) {
  // Stochastic depth: the mask [B,1,1] has the batch on axis 0 as x does; a
  // per-tensor mask [1,1,1] keeps its one value.
  for (const char *mask : {"sample", "tensor"}) {
    auto m = std::make_unique<Module>("drop_path");
    Builder b(m->main());
    Value *x = b.input("x", TensorType(DType::F32, {4, 3, 5}));
    Attrs a;
    a.set("ratio", 0.2);
    a.set("mask", std::string(mask));
    Node *d = b.createNode(Op::DropoutTrain, {x}, a, "drop_path");
    m->main().addOutput(d->result(0));
    m->plan().batch = (int64_t)4;
    ASSERT_FALSE(bool(rebatch(*m, 6))) << mask;
    EXPECT_EQ(d->result(0)->type(), TensorType(DType::F32, {6, 3, 5}));
    Dims want = llvm::StringRef(mask) == "sample" ? Dims{6, 1, 1} : Dims{1, 1, 1};
    EXPECT_EQ(d->result(1)->type(), TensorType(DType::F32, want)) << mask;
  }
}

TEST(Rebatch, ASymbolicBatchIsBound) {
  auto m = std::make_unique<Module>("symbolic");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 3}));
  m->main().addOutput(b.create(Op::Relu, {x}, {}, "relu"));
  ASSERT_FALSE(bool(rebatch(*m, 5)));
  EXPECT_EQ(m->batch(), std::optional<int64_t>(5));
  EXPECT_EQ(m->main().findNode("relu")->result()->type(), TensorType(DType::F32, {5, 3}));
}

/// x [4, 3] with `body` on it, bound to batch 4.
std::unique_ptr<Module> fixed(const std::function<Value *(Builder &, Value *)> &body) {
  auto m = std::make_unique<Module>("fixed");
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {4, 3}));
  m->main().addOutput(body(b, x));
  m->plan().batch = (int64_t)4;
  return m;
}

/// Each refusal names the node and leaves the module as it was.
void expectRefused(Module &m, llvm::StringRef node, llvm::StringRef why) {
  const std::string before = toText(m);
  std::string e = rebatchError(m, 6);
  EXPECT_NE(e.find(("node '" + node + "'").str()), std::string::npos) << e;
  EXPECT_NE(e.find(why), std::string::npos) << e;
  EXPECT_EQ(m.batch(), std::optional<int64_t>(4));
  EXPECT_EQ(toText(m), before);
}

TEST(Rebatch, RefusesAReshapeThatMixesSamples) {
  // [4, 3] as [3, 4]: a row holds parts of two samples.
  auto m = fixed([](Builder &b, Value *x) {
    return reshape(b, b.create(Op::Relu, {x}, {}, "relu"), {3, 4}, "mix");
  });
  expectRefused(*m, "mix", "does not keep the batch 4 of operand 'relu' on one dimension");
}

TEST(Rebatch, AReshapeKeepsTheBatchOnALaterAxis) {
  // x [4, 3] transposed to [3, 4] (the batch on axis 1), then [3, 4] as
  // [3, 2, 2]: a sequence-first layout splitting each sample (attention's
  // [L, N, E] -> [L, N * heads, E / heads] in small).
  auto m = fixed([](Builder &b, Value *x) {
    Attrs perm;
    perm.set("perm", Ints{1, 0});
    Value *t = b.create(Op::Transpose, {x}, std::move(perm), "seq_first");
    return reshape(b, t, {3, 4, 1}, "heads");
  });
  ASSERT_FALSE(bool(rebatch(*m, 6)));
  EXPECT_EQ(m->main().findNode("heads")->attrs().getInts("shape"), (Ints{3, 6, 1}));
  EXPECT_EQ(m->main().findNode("heads")->result()->type(), TensorType(DType::F32, {3, 6, 1}));
}

TEST(Rebatch, AClassTokenExpandedToTheBatchFollowsIt) {
  // ViT: a [1, 3] parameter expanded to [4, 1, 3] (one per sample) and put
  // before x [4, 3] as [4, 2, 3].
  auto m = fixed([](Builder &b, Value *x) {
    Attrs to;
    to.set("shape", Ints{4, 1, 3});
    Value *token = b.create(Op::Expand, {addVariable(b, "token", {1, 3})}, std::move(to), "expand");
    Attrs axis;
    axis.set("axis", int64_t(1));
    return b.create(Op::Concat, {token, reshape(b, x, {4, 1, 3}, "x3")}, std::move(axis), "cat");
  });
  llvm::Error e = rebatch(*m, 6);
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  EXPECT_EQ(m->main().findNode("expand")->attrs().getInts("shape"), (Ints{6, 1, 3}));
  EXPECT_EQ(m->main().findNode("cat")->result()->type(), TensorType(DType::F32, {6, 2, 3}));
}

TEST(Rebatch, RefusesAConstantOfTheOldBatch) {
  auto m = fixed([](Builder &b, Value *x) {
    Value *c = b.constant(Tensor(TensorType(DType::F32, {4, 3})), "per_sample");
    return b.create(Op::Add, {x, c}, {}, "add");
  });
  expectRefused(*m, "add", "at batch 6 (the model's shapes are fixed for batch 4)");
}

TEST(Rebatch, RefusesFixedRowsOfTheBatch) {
  // The first four rows: at batch 6 they would still be four.
  auto m = fixed([](Builder &b, Value *x) {
    Attrs a;
    a.set("starts", Ints{0});
    a.set("ends", Ints{4});
    a.set("axes", Ints{0});
    return b.create(Op::Slice, {x}, std::move(a), "rows");
  });
  expectRefused(*m, "rows", "its results do not carry it");
}

TEST(Rebatch, AReductionOverTheBatchIsAllowed) {
  auto m = fixed([](Builder &b, Value *x) {
    Attrs a;
    a.set("axes", Ints{0});
    a.set("keepdims", (int64_t)1);
    return b.create(Op::ReduceMean, {x}, std::move(a), "mean");
  });
  ASSERT_FALSE(bool(rebatch(*m, 6)));
  EXPECT_EQ(m->main().findNode("mean")->result()->type(), TensorType(DType::F32, {1, 3}));
}

} // namespace
