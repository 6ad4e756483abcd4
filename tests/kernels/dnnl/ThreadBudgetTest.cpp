//===- ThreadBudgetTest.cpp - Kernels run under the budget they were made for //
//
// A oneDNN primitive must not run with more threads than it was created for
// (per-thread scratch is sized at creation), so a kernel runs under
// KernelEnv::threads whatever the calling thread's OpenMP setting, and leaves
// that setting as it found it. (oneDNN's jit convolutions happen to keep their
// creation-time split, so the numbers alone would not show a missing scope;
// the restored setting does.)
//
//===----------------------------------------------------------------------===//

#include "tests/kernels/dnnl/DnnlTestUtil.h"

#include "kernels/KernelRunner.h"
#include "kernels/cpu/CpuBackend.h"

using namespace graphc;
using namespace graphc::test;

namespace {

TEST(DnnlThreads, CallersBudgetIsRestoredAndResultsMatchTheCreationBudget) {
  Attrs a;
  a.set("filter_shape", Ints{16, 16, 3, 3});
  a.set("pads", Ints{1, 1, 1, 1});
  auto node = mustMakeNode(Op::ConvGradFilter, {f32({4, 16, 9, 9}), f32({4, 16, 9, 9})}, a);
  ASSERT_TRUE(node);
  std::mt19937 rng(6);
  std::vector<Tensor> in = {randomTensor(f32({4, 16, 9, 9}), rng),
                            randomTensor(f32({4, 16, 9, 9}), rng)};
  int saved = cpuThreads();
  setCpuThreads(1);
  std::vector<Tensor> single = runOnce(*node->node, in); // created and run with 1 thread
  ASSERT_EQ(single.size(), 1u);

  KernelEnv env;
  env.threads = 1;
  auto k = KernelRegistry::global().create(*node->node, env);
  ASSERT_TRUE(bool(k)) << llvm::toString(k.takeError());
  setCpuThreads(4); // the caller asks for more than the kernel was built for
  Tensor out(f32({16, 16, 3, 3}));
  std::vector<TensorView> inViews = {viewOf(in[0]), viewOf(in[1])}, outViews = {viewOf(out)};
  std::vector<float> scratch((*k)->scratchBytes() / sizeof(float) + 16);
  KernelContext ctx;
  ctx.inputs = inViews;
  ctx.outputs = outViews;
  ctx.scratch = scratch.data() + (64 - (uintptr_t)scratch.data() % 64) % 64 / sizeof(float);
  ASSERT_FALSE(bool((*k)->run(ctx)));
  EXPECT_EQ(cpuThreads(), 4) << "the caller's setting is restored";
  setCpuThreads(saved);
  // Same primitive, same thread count: the same summation order, bit for bit.
  EXPECT_TRUE(out == single[0]);
}

} // namespace
