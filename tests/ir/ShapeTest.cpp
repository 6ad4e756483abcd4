#include "ir/Builder.h"
#include "ir/ShapeInference.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {
struct Fixture {
  Module m;
  Builder b{m.main()};
  Value *in(std::initializer_list<int64_t> dims, DType t = DType::F32) {
    return b.input(b.name("in"), TensorType(t, dims));
  }
  std::string shapeOf(Op op, llvm::ArrayRef<Value *> xs, Attrs a = {}) {
    auto n = b.tryCreate(op, xs, std::move(a));
    if (!n)
      return "error: " + llvm::toString(n.takeError());
    std::string s;
    for (auto &r : (*n)->results()) {
      if (!s.empty())
        s.push_back(' ');
      s.append(toString(r->type()));
    }
    return s;
  }
};
} // namespace

TEST(Shapes, ConvAndPoolsFollowPyTorchArithmetic) {
  Fixture f;
  Attrs conv;
  conv.set("strides", Ints{2, 2});
  EXPECT_EQ(f.shapeOf(Op::Conv, {f.in({1, 3, 299, 299}), f.in({32, 3, 3, 3})}, conv),
            "f32[1,32,149,149]");
  Attrs pool;
  pool.set("kernel_shape", Ints{3, 3});
  pool.set("strides", Ints{2, 2});
  EXPECT_EQ(f.shapeOf(Op::MaxPool, {f.in({1, 64, 147, 147})}, pool), "f32[1,64,73,73]");
  pool.set("ceil_mode", int64_t(1));
  EXPECT_EQ(f.shapeOf(Op::MaxPool, {f.in({1, 64, 112, 112})}, pool), "f32[1,64,56,56]");
  // ceil mode with a window that would start in the padding is dropped.
  EXPECT_EQ(windowOutputSize(5, 2, 2, 0, 0, 1, true), 3);
  EXPECT_EQ(windowOutputSize(4, 2, 2, 0, 0, 1, true), 2);
  Attrs grouped;
  grouped.set("group", int64_t(2));
  EXPECT_EQ(f.shapeOf(Op::Conv, {f.in({1, 4, 5, 5}), f.in({6, 2, 1, 1})}, grouped),
            "f32[1,6,5,5]");
  EXPECT_NE(f.shapeOf(Op::Conv, {f.in({1, 4, 5, 5}), f.in({6, 3, 1, 1})}, grouped).find("error"),
            std::string::npos);
}

TEST(Shapes, BroadcastMatMulAndGemm) {
  Fixture f;
  EXPECT_EQ(f.shapeOf(Op::Add, {f.in({kBatchDim, 3, 1}), f.in({4})}), "f32[N,3,4]");
  EXPECT_EQ(f.shapeOf(Op::MatMul, {f.in({7, 2, 3}), f.in({3, 5})}), "f32[7,2,5]");
  EXPECT_EQ(f.shapeOf(Op::MatMul, {f.in({3}), f.in({3, 5})}), "f32[5]");
  Attrs t;
  t.set("transB", int64_t(1));
  EXPECT_EQ(f.shapeOf(Op::Gemm, {f.in({kBatchDim, 2048}), f.in({1000, 2048}), f.in({1000})}, t),
            "f32[N,1000]");
  EXPECT_NE(f.shapeOf(Op::Add, {f.in({2, 3}), f.in({4})}).find("do not broadcast"),
            std::string::npos);
  EXPECT_NE(f.shapeOf(Op::Add, {f.in({2}), f.in({2}, DType::I64)}).find("dtypes"),
            std::string::npos);
}

TEST(Shapes, DataMovement) {
  Fixture f;
  Value *x = f.in({kBatchDim, 8, 4, 4});
  Attrs flat;
  EXPECT_EQ(f.shapeOf(Op::Flatten, {x}, flat), "f32[N,128]");
  Attrs split;
  split.set("axis", int64_t(1));
  split.set("split", Ints{3, 5});
  EXPECT_EQ(f.shapeOf(Op::Split, {x}, split), "f32[N,3,4,4] f32[N,5,4,4]");
  Attrs slice;
  slice.set("starts", Ints{1});
  slice.set("ends", Ints{INT64_MAX});
  slice.set("axes", Ints{2});
  slice.set("steps", Ints{2});
  EXPECT_EQ(f.shapeOf(Op::Slice, {x}, slice), "f32[N,8,2,4]");
  Attrs pad;
  pad.set("pads", Ints{0, 0, 1, 2, 0, 0, 3, 4});
  EXPECT_EQ(f.shapeOf(Op::Pad, {x}, pad), "f32[N,8,8,10]");
  Attrs red;
  red.set("axes", Ints{2, 3});
  red.set("keepdims", int64_t(0));
  EXPECT_EQ(f.shapeOf(Op::ReduceMean, {x}, red), "f32[N,8]");
  Attrs perm;
  perm.set("perm", Ints{0, 2, 3, 1});
  EXPECT_EQ(f.shapeOf(Op::Transpose, {x}, perm), "f32[N,4,4,8]");
  Attrs cat;
  cat.set("axis", int64_t(1));
  EXPECT_EQ(f.shapeOf(Op::Concat, {x, x}, cat), "f32[N,16,4,4]");
  Attrs g;
  g.set("axis", int64_t(1));
  EXPECT_EQ(f.shapeOf(Op::Gather, {x, f.in({2, 3}, DType::I64)}, g), "f32[N,2,3,4,4]");
  Attrs rs;
  rs.set("shape", Ints{kBatchDim, 32, 4});
  EXPECT_EQ(f.shapeOf(Op::Reshape, {x}, rs), "f32[N,32,4]");
  rs.set("shape", Ints{kBatchDim, 33, 4});
  EXPECT_NE(f.shapeOf(Op::Reshape, {x}, rs).find("cannot reshape"), std::string::npos);
}

TEST(Shapes, ResolveSliceMatchesPythonSemantics) {
  EXPECT_EQ(resolveSlice(10, -3, INT64_MAX, 1).size, 3);
  EXPECT_EQ(resolveSlice(10, 0, 10, 3).size, 4);
  EXPECT_EQ(resolveSlice(10, -1, INT64_MIN, -1).size, 10);
  EXPECT_EQ(resolveSlice(10, 8, 2, -2).size, 3);
  EXPECT_EQ(resolveSlice(10, 5, 2, 1).size, 0);
}

TEST(Shapes, BindBatchUpdatesShapeAttributes) {
  Fixture f;
  Value *x = f.in({kBatchDim, 6});
  Attrs rs;
  rs.set("shape", Ints{kBatchDim, 2, 3});
  Value *y = f.b.create(Op::Reshape, {x}, rs);
  ASSERT_FALSE(bool(bindBatch(f.m, 4)));
  EXPECT_EQ(toString(y->type()), "f32[4,2,3]");
  EXPECT_EQ(y->producer()->attrs().getInts("shape"), (Ints{4, 2, 3}));
  llvm::Error again = bindBatch(f.m, 8);
  ASSERT_TRUE(bool(again));
  EXPECT_NE(llvm::toString(std::move(again)).find("already bound"), std::string::npos);
}
