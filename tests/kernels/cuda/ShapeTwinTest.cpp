//===- ShapeTwinTest.cpp - Data movement CUDA kernels vs the CPU ----------===//
//
// Transpose, Slice, Expand, Concat / Split (and their batch forms), Pad,
// Gather and GatherGrad: bit for bit, every dtype's element size, odd and
// empty shapes; a bad gather index is reported, not a fault.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace graphc {
namespace {

Attrs ints(std::initializer_list<std::pair<const char *, Ints>> kv) {
  Attrs a;
  for (auto &[k, v] : kv)
    a.set(k, v);
  return a;
}

TEST(CudaShape, TransposeSliceExpand) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(31);
  struct Case {
    Op op;
    Dims shape;
    Attrs attrs;
  };
  const Case cases[] = {
      {Op::Transpose, {2, 3, 4, 5}, ints({{"perm", {0, 2, 3, 1}}})},
      {Op::Transpose, {33, 65}, {}},
      {Op::Transpose, {1025, 3, 7}, ints({{"perm", {2, 0, 1}}})},
      {Op::Transpose,
       {2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
       ints({{"perm", {9, 0, 8, 1, 7, 2, 6, 3, 5, 4}}})},
      {Op::Slice,
       {9, 8, 7},
       ints({{"starts", {1, -1, 0}}, {"ends", {8, -9, 7}}, {"steps", {2, -3, 1}}})},
      {Op::Slice, {10, 5}, ints({{"starts", {2}}, {"ends", {100}}, {"axes", {1}}})},
      {Op::Slice, {10, 5}, ints({{"starts", {5}}, {"ends", {5}}})},
      {Op::Expand, {3, 1, 5}, ints({{"shape", {2, 3, 4, 5}}})},
      {Op::Expand, {1}, ints({{"shape", {100001}}})},
      {Op::Transpose, {0, 3}, {}}};
  for (const Case &k : cases)
    for (DType dt : {DType::F32, DType::F16, DType::I64, DType::Bool}) {
      OneNode c;
      Node *n = c.node(k.op, {c.input("x", TensorType(dt, k.shape))}, k.attrs);
      ASSERT_TRUE(n);
      expectTwins(*n, {randomTensor(n->operand(0)->type(), rng, -50, 50)}, -1);
    }
}

TEST(CudaShape, ConcatAndSplit) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(32);
  for (DType dt : {DType::F32, DType::BF16, DType::I64, DType::Bool})
    for (int64_t axis : {0, 1, 2, -1}) {
      OneNode c;
      Dims base{3, 4, 5};
      int64_t ax = axis < 0 ? axis + 3 : axis;
      std::vector<Value *> parts;
      std::vector<Tensor> values;
      for (int64_t width : {2, 0, 7}) {
        Dims s = base;
        s[ax] = width;
        parts.push_back(
            c.input((llvm::Twine("p") + llvm::Twine(parts.size())).str(), TensorType(dt, s)));
        values.push_back(randomTensor(parts.back()->type(), rng, -9, 9));
      }
      Attrs a;
      a.set("axis", axis);
      Node *cat = c.node(Op::Concat, parts, a, "cat");
      ASSERT_TRUE(cat);
      expectTwins(*cat, values, -1);
      Attrs s;
      s.set("axis", axis);
      s.set("split", Ints{2, 0, 7});
      Node *split = c.node(Op::Split, {c.input("whole", cat->result()->type())}, s, "split");
      ASSERT_TRUE(split);
      expectTwins(*split, {randomTensor(cat->result()->type(), rng, -9, 9)}, -1);
    }
  OneNode c;
  TensorType t(DType::F32, {7, 3, 2});
  Attrs sizes;
  sizes.set("sizes", Ints{3, 0, 4});
  Node *split = c.node(Op::SplitBatch, {c.input("x", t)}, sizes, "split");
  ASSERT_TRUE(split);
  Tensor x = randomTensor(t, rng);
  expectTwins(*split, {x}, -1);
  std::vector<Value *> parts;
  for (unsigned i = 0; i < 3; ++i)
    parts.push_back(split->result(i));
  Node *join = c.node(Op::ConcatBatch, parts, {}, "join");
  ASSERT_TRUE(join);
  auto pieces = runNode(*split, {x});
  ASSERT_TRUE((bool)pieces);
  expectTwins(*join, *pieces, -1);
}

TEST(CudaShape, PadInEveryMode) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(33);
  const std::pair<Dims, Ints> cases[] = {{{3, 4}, {1, 2, 2, 0}},
                                         {{2, 3, 5}, {0, 3, 4, 1, 5, 0}},
                                         {{1, 1, 40, 40}, {0, 0, 3, 3, 0, 0, 3, 3}},
                                         {{6}, {-2, 1}},
                                         {{0, 2}, {1, 1, 0, 0}}};
  for (const char *mode : {"constant", "reflect", "edge"})
    for (const auto &[shape, pads] : cases)
      for (DType dt : {DType::F32, DType::F16, DType::I64, DType::Bool}) {
        if (shape[0] == 0 && std::string(mode) != "constant")
          continue;
        OneNode c;
        Attrs a;
        a.set("pads", pads);
        a.set("mode", std::string(mode));
        a.set("value", 1.5);
        Node *n = c.node(Op::Pad, {c.input("x", TensorType(dt, shape))}, a);
        ASSERT_TRUE(n);
        expectTwins(*n, {randomTensor(n->operand(0)->type(), rng, -9, 9)}, -1);
      }
}

Tensor indices(DType t, Dims shape, int64_t dim, std::mt19937 &rng) {
  Tensor idx(TensorType(t, shape));
  std::uniform_int_distribution<int64_t> u(-dim, dim - 1);
  for (int64_t k = 0; k < idx.numElements(); ++k)
    idx.set(k, (double)u(rng));
  return idx;
}

TEST(CudaShape, GatherAndItsGradient) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(34);
  for (int64_t axis : {0, 1, -1})
    for (DType it : {DType::I64, DType::I32})
      for (DType dt : {DType::F32, DType::F16, DType::I64}) {
        OneNode c;
        TensorType data(dt, {50, 6, 3});
        int64_t dim = data.dim(axis);
        Attrs a;
        a.set("axis", axis);
        Node *n = c.node(Op::Gather, {c.input("d", data), c.input("i", TensorType(it, {7, 9}))}, a);
        ASSERT_TRUE(n);
        Tensor idx = indices(it, {7, 9}, dim, rng);
        expectTwins(*n, {randomTensor(data, rng, -9, 9), idx}, -1);
        if (dt != DType::F32)
          continue;
        Attrs ga;
        ga.set("axis", axis);
        ga.set("data_shape", Ints{50, 6, 3});
        Node *g =
            c.node(Op::GatherGrad, {n->operand(1), c.input("dy", n->result()->type())}, ga, "g");
        ASSERT_TRUE(g);
        // Repeated indices accumulate in index order on both: bit for bit.
        expectTwins(*g, {idx, randomTensor(n->result()->type(), rng)}, -1);
      }
}

TEST(CudaShape, BadGatherIndicesAreReportedNotFaults) {
  SKIP_WITHOUT_CUDA();
  OneNode c;
  TensorType data(DType::F32, {5, 4});
  Node *n = c.node(Op::Gather, {c.input("d", data), c.input("i", TensorType(DType::I64, {3}))}, {},
                   "embed");
  ASSERT_TRUE(n);
  std::mt19937 rng(35);
  Tensor idx = Tensor::fromInts({3}, {1, 9, -7});
  auto gpu = runOnCuda(*n, {randomTensor(data, rng), idx});
  ASSERT_FALSE((bool)gpu);
  std::string msg = llvm::toString(gpu.takeError());
  EXPECT_NE(msg.find("node 'embed' (Gather)"), std::string::npos) << msg;
  // Either bad index may be the one named (the first to reach the word).
  EXPECT_TRUE(msg.find("value 9 at index 1") != std::string::npos ||
              msg.find("value -7 at index 2") != std::string::npos)
      << msg;
  EXPECT_NE(msg.find("2 elements in all"), std::string::npos) << msg;
  // The word is cleared: the next good run succeeds.
  auto good = runOnCuda(*n, {randomTensor(data, rng), Tensor::fromInts({3}, {1, 4, -5})});
  EXPECT_TRUE((bool)good) << llvm::toString(good.takeError());
}

} // namespace
} // namespace graphc
