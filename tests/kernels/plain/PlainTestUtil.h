//===- PlainTestUtil.h - Small graphs and direct kernel runs -----*- C++ -*-===//
#pragma once

#include "ir/Builder.h"
#include "ir/Random.h"
#include "kernels/KernelRunner.h"

#include <gtest/gtest.h>

namespace graphc {

/// A normal(0, scale) f32 tensor, the same for the same seed.
inline Tensor randomTensor(llvm::ArrayRef<int64_t> shape, uint64_t seed, float scale = 1) {
  Tensor t(TensorType(DType::F32, shape));
  RandomStream r(seed, 77);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = (float)r.normal() * scale;
  return t;
}

/// Runs a node and fails the test on an error.
inline std::vector<Tensor> mustRun(const Node &n, llvm::ArrayRef<Tensor> in, uint64_t step = 0,
                                   uint64_t seed = 0) {
  auto out = runNode(n, in, nullptr, step, seed);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return {};
  }
  return std::move(*out);
}

/// The error a node's run gives ("" when it succeeds).
inline std::string runError(const Node &n, llvm::ArrayRef<Tensor> in) {
  auto out = runNode(n, in);
  return out ? std::string() : llvm::toString(out.takeError());
}

/// Creates the node's CPU kernel and runs it on caller-made views (for
/// aliasing and layouts, which runNode does not do).
inline llvm::Error runOnViews(const Node &n, llvm::ArrayRef<TensorView> in,
                              llvm::ArrayRef<TensorView> out) {
  KernelEnv env;
  auto kernel = KernelRegistry::global().create(n, env);
  if (!kernel)
    return kernel.takeError();
  std::vector<uint64_t> scratch((*kernel)->scratchBytes() / 8 + 8);
  KernelContext ctx;
  ctx.inputs = in;
  ctx.outputs = out;
  ctx.scratch = scratch.data();
  return (*kernel)->run(ctx);
}

inline std::unique_ptr<Kernel> kernelFor(const Node &n) {
  auto kernel = KernelRegistry::global().create(n, KernelEnv());
  if (!kernel) {
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  return std::move(*kernel);
}

} // namespace graphc
