//===- PlansTest.cpp - The CUDA kernels' host-side decisions, no GPU ------===//
//
// Launch sizes, scratch layout, convolution geometry / lowering / algorithm
// choice / cache keys, GEMM plans, reduction geometry and plans, tensor-list
// chunking of the fused optimizer update, and the registry: every op and
// dtype with a CPU kernel has a CUDA kernel.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "kernels/cuda/ComputeCapability.h"
#include "kernels/cuda/ConvAlgorithmFile.h"
#include "kernels/cuda/ConvPlan.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/CudnnDescriptors.h"
#include "kernels/cuda/GemmPlan.h"
#include "kernels/cuda/KernelPlans.h"
#include "kernels/cuda/OptimizerDevice.h"
#include "kernels/cuda/ReduceHost.h"

#include <climits>
#include <set>

namespace graphc {
namespace {

using namespace cuda;

TEST(LaunchSize, GridStrideCoversEverySizeWithCappedBlocks) {
  EXPECT_EQ(launchFor(0).blocks, 0u);
  EXPECT_EQ(launchFor(-3).blocks, 0u);
  EXPECT_EQ(launchFor(1).blocks, 1u);
  EXPECT_EQ(launchFor(256).blocks, 1u);
  EXPECT_EQ(launchFor(257).blocks, 2u);
  EXPECT_EQ(launchFor(1000, 128).blocks, 8u);
  EXPECT_EQ(launchFor(1000, 128).threads, 128u);
  // Past the cap the grid stays capped; the loop strides over the rest.
  EXPECT_EQ(launchFor(int64_t(1) << 40).blocks, (unsigned)kMaxBlocks);
  for (int64_t n : {int64_t(1), int64_t(255), int64_t(1) << 21, (int64_t(1) << 33) + 7}) {
    LaunchSize l = launchFor(n);
    EXPECT_GE((int64_t)l.blocks * l.threads, std::min<int64_t>(n, kMaxBlocks * kThreads)) << n;
  }
}

TEST(ScratchLayout, SizingAndPlacingAgreeAndAlign) {
  ScratchLayout sizing;
  sizing.take(10);
  sizing.take(size_t(1) << 20);
  sizing.take(3);
  alignas(64) static char arena[(1 << 20) + 4096];
  for (size_t shift : {0, 64, 128, 192}) {
    ScratchLayout placing(arena + shift);
    auto a = reinterpret_cast<uintptr_t>(placing.take(10));
    auto b = reinterpret_cast<uintptr_t>(placing.take(size_t(1) << 20));
    auto c = reinterpret_cast<uintptr_t>(placing.take(3));
    EXPECT_EQ(a % 256, 0u);
    EXPECT_EQ(b % 256, 0u);
    EXPECT_EQ(c % 256, 0u);
    EXPECT_GE(b, a + 10);
    EXPECT_GE(c, b + (size_t(1) << 20));
    // Everything ends within what sizing asked for.
    EXPECT_LE(c + 3, reinterpret_cast<uintptr_t>(arena + shift) + sizing.bytes());
  }
  EXPECT_EQ(ScratchLayout().bytes(), 0u);
}

TEST(CudnnDescriptors, SizesMustFitInt) {
  EXPECT_TRUE(fitsCudnnInt({2, 3, 4, 5}));
  EXPECT_FALSE(fitsCudnnInt({0, 3, 4, 5}));
  EXPECT_FALSE(fitsCudnnInt({int64_t(INT_MAX) + 1, 1, 1, 1}));
  EXPECT_FALSE(fitsCudnnInt({65536, 65536, 1, 1}));
}

//===-- Convolution --------------------------------------------------------===//

Node *convNode(OneNode &c, Dims x, Dims w, Ints pads, Ints strides = {1, 1},
               Ints dilations = {1, 1}, int64_t group = 1) {
  Attrs a;
  a.set("pads", pads);
  a.set("strides", strides);
  a.set("dilations", dilations);
  a.set("group", group);
  return c.node(Op::Conv,
                {c.input("x", TensorType(DType::F32, x)), c.input("w", TensorType(DType::F32, w))},
                a);
}

TEST(ConvPlan, SymmetricPaddingNeedsNoExplicitPad) {
  OneNode c;
  Node *n = convNode(c, {2, 3, 9, 7}, {4, 3, 3, 3}, {1, 1, 1, 1});
  auto g = convGeometry(*n);
  ASSERT_TRUE((bool)g) << llvm::toString(g.takeError());
  ConvLowering l = lowerConv(*g);
  EXPECT_FALSE(l.explicitPad);
  EXPECT_EQ(l.pad[0], 1);
  EXPECT_EQ(l.pad[1], 1);
  EXPECT_EQ(l.paddedX, g->x);
}

TEST(ConvPlan, AsymmetricPaddingIsPartlyExplicit) {
  OneNode c;
  // top 2, left 0, bottom 1, right 3; stride 2.
  Node *n = convNode(c, {1, 2, 10, 11}, {5, 2, 3, 3}, {2, 0, 1, 3}, {2, 2});
  auto g = convGeometry(*n);
  ASSERT_TRUE((bool)g) << llvm::toString(g.takeError());
  ConvLowering l = lowerConv(*g);
  EXPECT_TRUE(l.explicitPad);
  EXPECT_EQ(l.pad[0], 1);
  EXPECT_EQ(l.pad[1], 0);
  EXPECT_EQ(l.extraBegin[0], 1);
  EXPECT_EQ(l.extraEnd[0], 0);
  EXPECT_EQ(l.extraBegin[1], 0);
  EXPECT_EQ(l.extraEnd[1], 3);
  EXPECT_EQ(l.paddedX, (Dims{1, 2, 11, 14}));
  // cuDNN's floor over the padded input with symmetric pads gives the
  // graph's output size.
  for (int i = 0; i < 2; ++i) {
    int64_t extent = (g->w[2 + i] - 1) * g->dilations[i] + 1;
    int64_t out = (l.paddedX[2 + i] + 2 * l.pad[i] - extent) / g->strides[i] + 1;
    EXPECT_EQ(out, g->y[2 + i]) << "axis " << i;
  }
}

TEST(ConvPlan, CeilModeWidensTheEndPadding) {
  OneNode c;
  Attrs a;
  a.set("strides", Ints{2, 2});
  a.set("ceil_mode", int64_t(1));
  Node *n = c.node(Op::Conv,
                   {c.input("x", TensorType(DType::F32, {1, 1, 6, 6})),
                    c.input("w", TensorType(DType::F32, {1, 1, 3, 3}))},
                   a);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->result()->type().shape, (Dims{1, 1, 3, 3}));
  auto g = convGeometry(*n);
  ASSERT_TRUE((bool)g) << llvm::toString(g.takeError());
  EXPECT_EQ(g->padEnd[0], 1);
  ConvLowering l = lowerConv(*g);
  EXPECT_TRUE(l.explicitPad);
  EXPECT_EQ(l.paddedX, (Dims{1, 1, 7, 7}));
}

TEST(ConvPlan, GradientNodesReadShapesFromAttributes) {
  OneNode c;
  Attrs a;
  a.set("pads", Ints{1, 1, 1, 1});
  a.set("input_shape", Ints{2, 4, 8, 8});
  Node *n = c.node(Op::ConvGradData,
                   {c.input("dy", TensorType(DType::F32, {2, 6, 8, 8})),
                    c.input("w", TensorType(DType::F32, {6, 2, 3, 3}))},
                   [&] {
                     Attrs b = a;
                     b.set("group", int64_t(2));
                     return b;
                   }());
  auto g = convGeometry(*n);
  ASSERT_TRUE((bool)g) << llvm::toString(g.takeError());
  EXPECT_EQ(g->x, (Dims{2, 4, 8, 8}));
  EXPECT_EQ(g->group, 2);
  // A filter that does not fit the group is an error naming the node (from
  // shape inference now, before any kernel sees it).
  OneNode bad;
  Attrs b;
  b.set("filter_shape", Ints{6, 3, 3, 3});
  b.set("group", int64_t(2));
  auto f = bad.builder().tryCreate(Op::ConvGradFilter,
                                   {bad.input("x", TensorType(DType::F32, {2, 4, 8, 8})),
                                    bad.input("dy", TensorType(DType::F32, {2, 6, 6, 6}))},
                                   b, "gf");
  ASSERT_FALSE((bool)f);
  std::string msg = llvm::toString(f.takeError());
  EXPECT_NE(msg.find("'gf'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("group 2"), std::string::npos) << msg;
}

TEST(ConvPlan, AlgorithmChoicePrefersDeterministicFittingCandidates) {
  std::vector<AlgoCandidate> c(4);
  c[0] = {7, true, 1 << 30, true, false};  // too much workspace
  c[1] = {3, true, 1 << 20, false, false}; // not deterministic
  c[2] = {5, false, 0, true, false};       // failed
  c[3] = {1, true, 0, true, true};         // tensor ops
  EXPECT_EQ(chooseConvAlgorithm(c, size_t(256) << 20, true), std::optional<size_t>(3));
  // Strict FP32 refuses tensor-core math: the non-deterministic one is next.
  EXPECT_EQ(chooseConvAlgorithm(c, size_t(256) << 20, false), std::optional<size_t>(1));
  EXPECT_EQ(chooseConvAlgorithm(c, size_t(512) << 20, false), std::optional<size_t>(1));
  EXPECT_EQ(chooseConvAlgorithm(c, size_t(2) << 30, false), std::optional<size_t>(0));
  EXPECT_EQ(chooseConvAlgorithm({c[2]}, size_t(1) << 30, true), std::nullopt);
  EXPECT_EQ(chooseConvAlgorithm({}, size_t(1) << 30, true), std::nullopt);
  // Non-deterministic algorithms allowed (GRAPHC_CUDNN_DETERMINISTIC=0): the
  // first that fits, in cuDNN's order.
  EXPECT_EQ(chooseConvAlgorithm(c, size_t(256) << 20, true, false), std::optional<size_t>(1));
  EXPECT_EQ(chooseConvAlgorithm(c, size_t(2) << 30, true, false), std::optional<size_t>(0));
}

TEST(ConvPlan, CacheKeysSeparateWhatChangesTheChoice) {
  OneNode c;
  Node *a = convNode(c, {2, 3, 9, 7}, {4, 3, 3, 3}, {1, 1, 1, 1});
  Node *b = convNode(c, {2, 3, 9, 7}, {4, 3, 3, 3}, {1, 1, 1, 1});
  Node *s = convNode(c, {2, 3, 9, 7}, {4, 3, 3, 3}, {1, 1, 1, 1}, {2, 2});
  auto ga = convGeometry(*a), gb = convGeometry(*b), gs = convGeometry(*s);
  ASSERT_TRUE(ga && gb && gs);
  ConvChoicePolicy tf32, fp32, half, bf16, any, measured, halfNhwc;
  fp32.allowTF32 = false;
  half.data = DType::F16;
  bf16.data = DType::BF16;
  halfNhwc.data = DType::F16;
  halfNhwc.channelsLast = true;
  any.deterministic = false;
  measured.measured = true;
  const std::string h200 = deviceContextKey("NVIDIA H200", 9, 0, 91400, 13000);
  const std::string h100 = deviceContextKey("NVIDIA H100", 9, 0, 91400, 13000);
  const std::string newer = deviceContextKey("NVIDIA H200", 9, 0, 91500, 13000);
  std::set<std::string> keys;
  EXPECT_EQ(convCacheKey(h200, *ga, ConvDirection::Forward, tf32),
            convCacheKey(h200, *gb, ConvDirection::Forward, tf32));
  keys.insert(convCacheKey(h200, *ga, ConvDirection::Forward, tf32));
  keys.insert(convCacheKey(h200, *gs, ConvDirection::Forward, tf32));
  keys.insert(convCacheKey(h200, *ga, ConvDirection::BackwardData, tf32));
  keys.insert(convCacheKey(h200, *ga, ConvDirection::BackwardFilter, tf32));
  keys.insert(convCacheKey(h200, *ga, ConvDirection::Forward, fp32));
  keys.insert(convCacheKey(h100, *ga, ConvDirection::Forward, tf32));
  keys.insert(convCacheKey(newer, *ga, ConvDirection::Forward, tf32));
  keys.insert(convCacheKey(h200, *ga, ConvDirection::Forward, half));
  keys.insert(convCacheKey(h200, *ga, ConvDirection::Forward, bf16));
  keys.insert(convCacheKey(h200, *ga, ConvDirection::Forward, any));
  keys.insert(convCacheKey(h200, *ga, ConvDirection::Forward, measured));
  keys.insert(convCacheKey(h200, *ga, ConvDirection::Forward, halfNhwc));
  EXPECT_EQ(keys.size(), 12u);
  EXPECT_NE(convCacheKey(h200, *ga, ConvDirection::Forward, halfNhwc).find(" f16 nhwc"),
            std::string::npos);
  // Keys of earlier choice files still match: f32 and f16 spell as before.
  EXPECT_NE(convCacheKey(h200, *ga, ConvDirection::Forward, half).find(" f16"), std::string::npos);
  EXPECT_NE(convCacheKey(h200, *ga, ConvDirection::Forward, bf16).find(" bf16"), std::string::npos);
  EXPECT_NE(convCacheKey(h200, *ga, ConvDirection::Forward, tf32).find(" tf32"), std::string::npos);
}

TEST(ConvPlan, TypesAreOneDataTypeWithF32WeightsBeside16BitData) {
  const DType f32 = DType::F32, f16 = DType::F16, bf16 = DType::BF16;
  // One type throughout: f32, and fp16's plans (f16 weights cast in the graph).
  for (DType t : {f32, f16, bf16}) {
    auto c = convTypes(Op::Conv, {t, t, t}, t);
    ASSERT_TRUE((bool)c) << llvm::toString(c.takeError());
    EXPECT_EQ(c->data, t);
    EXPECT_FALSE(c->wideWeights || c->wideBias);
  }
  // bf16 plans: bf16 data, f32 weights and bias narrowed through scratch.
  auto conv = convTypes(Op::Conv, {bf16, f32, f32}, bf16);
  ASSERT_TRUE((bool)conv) << llvm::toString(conv.takeError());
  EXPECT_EQ(conv->data, bf16);
  EXPECT_TRUE(conv->wideWeights && conv->wideBias);
  auto data = convTypes(Op::ConvGradData, {bf16, f32}, bf16);
  ASSERT_TRUE((bool)data);
  EXPECT_TRUE(data->wideWeights);
  EXPECT_FALSE(data->wideBias);
  // The filter gradient {to = f32}: computed in bf16, widened.
  auto filter = convTypes(Op::ConvGradFilter, {bf16, bf16}, f32);
  ASSERT_TRUE((bool)filter);
  EXPECT_EQ(filter->data, bf16);
  EXPECT_TRUE(filter->wideWeights);
  auto narrowFilter = convTypes(Op::ConvGradFilter, {bf16, bf16}, bf16);
  ASSERT_TRUE((bool)narrowFilter);
  EXPECT_FALSE(narrowFilter->wideWeights);
  // What cuDNN cannot take: f32 data beside 16-bit weights, mixed 16-bit
  // types, x and dy apart, a result of another type, integers.
  auto refused = [](Op op, std::vector<DType> in, DType out) {
    auto c = convTypes(op, in, out);
    if (c)
      return std::string("accepted");
    return llvm::toString(c.takeError());
  };
  EXPECT_NE(refused(Op::Conv, {f32, bf16}, f32).find("one dtype"), std::string::npos);
  EXPECT_NE(refused(Op::Conv, {bf16, f16}, bf16).find("the weights f16"), std::string::npos);
  EXPECT_NE(refused(Op::Conv, {bf16, f32, f16}, bf16).find("the bias f16"), std::string::npos);
  EXPECT_NE(refused(Op::Conv, {bf16, f32}, f32).find("the result f32"), std::string::npos);
  EXPECT_NE(refused(Op::ConvGradFilter, {bf16, f32}, f32).find("dy f32"), std::string::npos);
  EXPECT_NE(refused(Op::ConvGradFilter, {f32, f32}, bf16).find("filter gradient bf16"),
            std::string::npos);
  EXPECT_NE(refused(Op::Conv, {DType::I32, DType::I32}, DType::I32).find("not i32"),
            std::string::npos);
}

TEST(ConvPlan, CudnnDataTypesOfTheThreeFloatTypes) {
  auto type = [](DType t) {
    auto c = cudnnDataTypeOf(t);
    if (!c) {
      llvm::consumeError(c.takeError());
      return (int)-1;
    }
    return (int)*c;
  };
  EXPECT_EQ(type(DType::F32), (int)CUDNN_DATA_FLOAT);
  EXPECT_EQ(type(DType::F16), (int)CUDNN_DATA_HALF);
  EXPECT_EQ(type(DType::BF16), (int)CUDNN_DATA_BFLOAT16);
  for (DType t : {DType::I64, DType::I32, DType::Bool})
    EXPECT_EQ(type(t), -1) << dtypeName(t).str();
}

TEST(ComputeCapability, Bf16NeedsAmpereOrNewer) {
  const ComputeCapability volta{7, 0}, turing{7, 5}, ampere{8, 0}, ada{8, 9}, hopper{9, 0},
      blackwell{10, 0};
  for (ComputeCapability cc : {volta, turing, ampere, ada, hopper, blackwell}) {
    // f32 and f16 run everywhere.
    EXPECT_EQ(dtypeRefusal(DType::F32, 0, "x", cc), "");
    EXPECT_EQ(dtypeRefusal(DType::F16, 0, "x", cc), "");
  }
  for (ComputeCapability cc : {ampere, ada, hopper, blackwell})
    EXPECT_EQ(dtypeRefusal(DType::BF16, 0, "x", cc), "") << cc.major << "." << cc.minor;
  EXPECT_EQ(dtypeRefusal(DType::BF16, 1, "Tesla T4", turing),
            "bf16 needs a GPU of compute capability 8.0 or newer (bf16 tensor cores and cuDNN's "
            "bf16 convolutions); GPU 1 (Tesla T4) has 7.5");
  EXPECT_NE(dtypeRefusal(DType::BF16, 0, "Tesla V100", volta), "");
}

TEST(SoftmaxPlan, TheAxisBecomesCudnnChannels) {
  for (auto [axis, want] : {std::pair<int64_t, Dims>{-1, {6, 5, 1, 1}},
                            {0, {1, 2, 15, 1}},
                            {1, {2, 3, 5, 1}},
                            {2, {6, 5, 1, 1}}}) {
    OneNode c;
    Attrs a;
    a.set("axis", axis);
    Node *n = c.node(Op::Softmax, {c.input("x", TensorType(DType::F32, {2, 3, 5}))}, a);
    ASSERT_TRUE(n);
    EXPECT_EQ(softmaxView(*n), want) << "axis " << axis;
  }
}

//===-- GEMM ---------------------------------------------------------------===//

GemmPlan matmulPlan(Dims a, Dims b) {
  OneNode c;
  Node *n = c.node(Op::MatMul, {c.input("a", TensorType(DType::F32, a)),
                                c.input("b", TensorType(DType::F32, b))});
  auto p = planMatMul(*n);
  EXPECT_TRUE((bool)p) << llvm::toString(p.takeError());
  return p ? *p : GemmPlan();
}

TEST(GemmPlan, MatMulForms) {
  GemmPlan p = matmulPlan({5, 7}, {7, 3});
  EXPECT_EQ(p.form, GemmForm::Single);
  EXPECT_EQ(p.m, 5);
  EXPECT_EQ(p.n, 3);
  EXPECT_EQ(p.k, 7);
  EXPECT_EQ(p.lda, 7);
  EXPECT_EQ(p.ldb, 3);
  // A batch against one B folds into the rows.
  p = matmulPlan({4, 5, 7}, {7, 3});
  EXPECT_EQ(p.form, GemmForm::Single);
  EXPECT_EQ(p.m, 20);
  EXPECT_EQ(p.batch, 1);
  // One A against a batch of B: strided with A's stride 0.
  p = matmulPlan({5, 7}, {4, 7, 3});
  EXPECT_EQ(p.form, GemmForm::Strided);
  EXPECT_EQ(p.batch, 4);
  EXPECT_EQ(p.strideA, 0);
  EXPECT_EQ(p.strideB, 21);
  EXPECT_EQ(p.strideC, 15);
  // Both batched.
  p = matmulPlan({2, 3, 5, 7}, {2, 3, 7, 3});
  EXPECT_EQ(p.form, GemmForm::Strided);
  EXPECT_EQ(p.batch, 6);
  EXPECT_EQ(p.strideA, 35);
  EXPECT_EQ(p.strideB, 21);
  // An empty batch stays empty against a broadcast one (not max(0, 1)).
  p = matmulPlan({0, 5, 7}, {7, 2});
  EXPECT_EQ(p.m * p.n * p.batch, 0);
  p = matmulPlan({5, 7}, {1, 0, 7, 2});
  EXPECT_EQ(p.m * p.n * p.batch, 0);
  // Crossed broadcasting needs pointer arrays; the index gives each batch
  // its matrices.
  p = matmulPlan({2, 1, 5, 7}, {1, 3, 7, 3});
  EXPECT_EQ(p.form, GemmForm::PointerArray);
  EXPECT_EQ(p.batch, 6);
  EXPECT_EQ(pointerArrayBytes(p), 6 * 3 * sizeof(void *));
  for (int64_t i = 0; i < 6; ++i) {
    int64_t off[2];
    p.batchIndex.offsets(i, off);
    EXPECT_EQ(off[0], (i / 3) * 35) << i;
    EXPECT_EQ(off[1], (i % 3) * 21) << i;
  }
  // Vectors.
  p = matmulPlan({7}, {7, 3});
  EXPECT_EQ(p.m, 1);
  p = matmulPlan({4, 5, 7}, {7});
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.m, 20);
}

TEST(GemmPlan, GemmTransposesKeepStoredLeadingDimensions) {
  OneNode c;
  Attrs a;
  a.set("transA", int64_t(1));
  a.set("transB", int64_t(1));
  a.set("alpha", 0.5);
  Node *n = c.node(
      Op::Gemm,
      {c.input("a", TensorType(DType::F32, {7, 5})), c.input("b", TensorType(DType::F32, {3, 7}))},
      a);
  auto p = planGemm(*n);
  ASSERT_TRUE((bool)p) << llvm::toString(p.takeError());
  EXPECT_EQ(p->m, 5);
  EXPECT_EQ(p->n, 3);
  EXPECT_EQ(p->k, 7);
  EXPECT_EQ(p->lda, 5);
  EXPECT_EQ(p->ldb, 7);
  EXPECT_EQ(p->ldc, 3);
  EXPECT_TRUE(p->transA && p->transB);
  EXPECT_EQ(p->alpha, 0.5f);
}

//===-- Reductions ---------------------------------------------------------===//

TEST(PoolPlan, PlanesBeyond32BitIndicesAreRefused) {
  // The pooling kernels index within a plane in 32 bits.
  Attrs a;
  a.set("kernel_shape", Ints{3, 3});
  a.set("strides", Ints{2, 2});
  auto planOf = [&](Dims x) {
    OneNode c;
    Node *n = c.node(Op::MaxPool, {c.input("x", TensorType(DType::F32, x))}, a);
    EXPECT_TRUE(n);
    return poolParams(*n);
  };
  auto ok = planOf({2, 3, 46000, 46000});
  ASSERT_TRUE((bool)ok) << llvm::toString(ok.takeError());
  EXPECT_EQ(ok->h, 46000);
  EXPECT_EQ(ok->oh, 22999);
  for (Dims x : {Dims{1, 1, 46341, 46341}, Dims{1, 1, 3, int64_t(1) << 31}}) {
    auto refused = planOf(x);
    ASSERT_FALSE((bool)refused) << shapeToString(x);
    EXPECT_NE(llvm::toString(refused.takeError()).find("beyond this kernel"), std::string::npos);
  }
}

TEST(ReducePlan, GeometryMergesRunsAndDropsUnitAxes) {
  ReductionGeometry g = reductionGeometry({2, 3, 1, 4, 5}, {false, true, true, true, false});
  EXPECT_EQ(g.keptDims, (Dims{2, 5}));
  EXPECT_EQ(g.keptStrides, (Dims{60, 1}));
  EXPECT_EQ(g.reducedDims, (Dims{12}));
  EXPECT_EQ(g.reducedStrides, (Dims{5}));
  EXPECT_FALSE(g.innerReduced);
  EXPECT_EQ(g.outputs, 10);
  EXPECT_EQ(g.count, 12);
  g = reductionGeometry({8, 16, 7, 7}, {true, false, true, true});
  EXPECT_EQ(g.keptDims, (Dims{16}));
  EXPECT_EQ(g.reducedDims, (Dims{8, 49}));
  EXPECT_EQ(g.reducedStrides, (Dims{784, 1}));
  EXPECT_TRUE(g.innerReduced);
  g = reductionGeometry({3, 0, 2}, {false, true, false});
  EXPECT_EQ(g.count, 0);
  EXPECT_EQ(g.outputs, 6);
  g = reductionGeometry({1, 1}, {true, true});
  EXPECT_EQ(g.outputs, 1);
  EXPECT_EQ(g.count, 1);
  StridedIndex<1> kept, reduced;
  EXPECT_TRUE(g.toIndices(kept, reduced));
  int64_t off;
  kept.offsets(0, &off);
  EXPECT_EQ(off, 0);
}

TEST(ReducePlan, ChunksCoverEveryTermOnceAndDependOnShapesOnly) {
  for (auto [outputs, count, inner] : {std::tuple<int64_t, int64_t, bool>{1, 10000000, true},
                                       {64, 39200, true},
                                       {1000, 10, true},
                                       {4, 1000000, false},
                                       {100000, 3, false},
                                       {7, 0, true},
                                       {1, 1, false}}) {
    ReducePlan p = planReduction(outputs, count, inner);
    ReducePlan again = planReduction(outputs, count, inner);
    EXPECT_EQ(p.chunks, again.chunks);
    EXPECT_GE(p.chunks, 1);
    EXPECT_GE(p.chunks * p.chunkLen, count) << outputs << "x" << count;
    EXPECT_LT((p.chunks - 1) * p.chunkLen, std::max<int64_t>(count, 1)) << outputs << "x" << count;
    EXPECT_EQ(p.scratchBytes(), p.chunks > 1 ? (size_t)(outputs * p.chunks) * 8 : 0u);
  }
  // A full reduction of a large tensor is split; a wide one of short rows is not.
  EXPECT_GT(planReduction(1, 10000000, true).chunks, 1);
  EXPECT_EQ(planReduction(100000, 3, false).chunks, 1);
  EXPECT_EQ(planReduction(1, 10000000, true).mode, ReduceMode::Block);
  EXPECT_EQ(planReduction(1000, 10, true).mode, ReduceMode::Thread);
}

//===-- Fused optimizer updates --------------------------------------------===//

TEST(TensorLists, EveryChunkOnceWithinTheLimits) {
  std::vector<int64_t> sizes = {10, 0, 1, 100, 37, 64, 65, 1000, 0, 3, 129};
  for (int maxTensors : {1, 2, 3, 32})
    for (int maxBlocks : {1, 2, 5, 320}) {
      auto launches = planTensorLists(sizes, 16, maxTensors, maxBlocks);
      std::vector<std::vector<int>> seen(sizes.size());
      for (const ListLaunch &l : launches) {
        EXPECT_LE((int)l.tensors.size(), maxTensors);
        EXPECT_LE((int)l.blocks.size(), maxBlocks);
        EXPECT_FALSE(l.blocks.empty());
        for (auto [slot, chunk] : l.blocks) {
          ASSERT_LT(slot, (int)l.tensors.size());
          seen[l.tensors[slot]].push_back(chunk);
        }
      }
      for (size_t t = 0; t < sizes.size(); ++t) {
        std::vector<int> want;
        for (int c = 0; c * 16 < sizes[t]; ++c)
          want.push_back(c);
        EXPECT_EQ(seen[t], want) << "tensor " << t << " with " << maxTensors << " tensors and "
                                 << maxBlocks << " blocks per launch";
      }
    }
  // Many small parameters: a few launches, not one per parameter.
  std::vector<int64_t> params(300, 1000);
  EXPECT_EQ(planTensorLists(params).size(), 10u);
  EXPECT_TRUE(planTensorLists({}).empty());
  EXPECT_TRUE(planTensorLists({0, 0}).empty());
}

TEST(TensorLists, LaunchParametersStayUnderFourKilobytes) {
  EXPECT_LT(sizeof(TensorList) + sizeof(UpdateHyper) + sizeof(UpdateRule), 4096u);
}

//===-- Registry -----------------------------------------------------------===//

TEST(CudaRegistry, EveryCpuKernelHasACudaTwin) {
  const KernelRegistry &r = KernelRegistry::global();
  std::vector<std::string> missing;
  for (unsigned o = 0; o < numOps(); ++o)
    for (DType t : kAllDTypes)
      if (r.find((Op)o, DeviceKind::CPU, t) && !r.find((Op)o, DeviceKind::GPU, t))
        missing.push_back(opName((Op)o).str() + ":" + dtypeName(t).str());
  EXPECT_TRUE(missing.empty()) << llvm::join(missing, ", ");
}

} // namespace
} // namespace graphc
