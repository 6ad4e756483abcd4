//===- CudaKernel.h - What the CUDA kernel classes share ---------*- C++ -*-===//
//
// Every CUDA kernel derives from CudaKernel, which guarantees that
//  1. errors from creation (init) and from enqueueing (enqueue) come back
//     naming the node and op;
//  2. run() only enqueues work on ctx.stream (a cudaStream_t): it never
//     synchronizes, allocates or reads device memory on the host;
//  3. a kernel's scratch use stays within scratchBytes() (kernels size it
//     with ScratchLayout, the same arithmetic at creation and at run time);
//  4. its layout answers are GpuLayoutRules.h's for its node, and run() gets
//     its tensors in the layouts prepare() was given (plain until then).
//
// Also here: the broadcast index of a node's operands (through the CPU's
// loop nests, so both backends merge axes the same way) and small helpers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diagnostics.h"
#include "kernels/Kernel.h"
#include "kernels/cuda/CudaBackend.h"
#include "kernels/cuda/CudaCheck.h"
#include "kernels/cuda/DeviceCommon.h"
#include "kernels/cuda/GpuLayoutRules.h"

#include "llvm/ADT/SmallVector.h"

namespace graphc {

namespace plain {
struct LoopNest;
}

class CudaKernel : public Kernel {
public:
  CudaKernel(const Node &n, const KernelEnv &env);

  /// Creation work that can fail (descriptors, algorithm choice); called
  /// once by the factory.
  virtual llvm::Error init() { return llvm::Error::success(); }
  llvm::Error run(KernelContext &ctx) final;

  bool acceptsLayout(unsigned i, Layout l) const final { return layouts_.accepts(i, l); }
  bool producesLayout(unsigned i, Layout l) const final { return layouts_.produces(i, l); }
  std::optional<Layout> preferredOperandLayout(unsigned i) const final {
    return layouts_.preferOperands[i];
  }
  std::optional<Layout> preferredResultLayout(unsigned i) const final {
    return layouts_.preferResults[i];
  }
  bool layoutFollowsOperands() const final { return layouts_.follows; }
  /// Keeps the layouts (an error where one is not in the answers), then
  /// lets the kernel adapt (layoutsChosen()).
  llvm::Error prepare(llvm::ArrayRef<Layout> operands, llvm::ArrayRef<Layout> results) final;
  ReorderCount reordersRun() const override { return reorders_; }

protected:
  virtual llvm::Error enqueue(KernelContext &ctx) = 0;
  /// Called by prepare() once the layouts are known (operandLayout(),
  /// resultLayout()); kernels whose plan or scratch depends on them redo it.
  virtual llvm::Error layoutsChosen() { return llvm::Error::success(); }
  Layout operandLayout(unsigned i) const { return operandLayouts_[i]; }
  Layout resultLayout(unsigned i = 0) const { return resultLayouts_[i]; }
  /// Counts a layout copy of `bytes` the kernel enqueued (reordersRun()).
  void countReorder(size_t bytes) {
    ++reorders_.reorders;
    reorders_.bytes += (int64_t)bytes;
  }

  const Node &node() const { return *node_; }
  CudaBackend &backend() const { return *backend_; }
  const CudaLibraries &libs() const { return backend_->libraries(); }
  static cudaStream_t streamOf(const KernelContext &ctx) {
    return static_cast<cudaStream_t>(ctx.stream);
  }
  const TensorType &operandType(unsigned i) const { return node_->operand(i)->type(); }
  const TensorType &resultType(unsigned i = 0) const { return node_->result(i)->type(); }
  /// Whether any operand or result has no elements.
  bool anyEmpty() const;

private:
  const Node *node_;
  CudaBackend *backend_;
  LayoutAnswers layouts_;
  llvm::SmallVector<Layout, 4> operandLayouts_, resultLayouts_;
  ReorderCount reorders_;
};

/// Prefixes an error with "node 'name' (Op): ".
llvm::Error inNode(const Node &n, llvm::Error e);

/// An error when an operand or result still has the symbolic batch.
llvm::Error checkStaticShapes(const Node &n);

/// A factory that constructs K(node, env) and runs its init().
template <typename K> KernelFactory cudaFactory() {
  return [](const Node &n, const KernelEnv &env) -> llvm::Expected<std::unique_ptr<Kernel>> {
    if (!env.backend)
      return nodeError(n, "CUDA kernel created without a CUDA backend");
    if (auto e = checkStaticShapes(n))
      return e;
    auto k = std::make_unique<K>(n, env);
    if (auto e = k->init())
      return inNode(n, std::move(e));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

/// A loop nest in the fixed-size form device code reads; an error when the
/// merged nest has more than cuda::kMaxRank axes.
template <int Ops>
llvm::Expected<cuda::StridedIndex<Ops>> toStridedIndex(const Node &n, const plain::LoopNest &nest);

/// The broadcast index of operands `shapes` read as `out` (numpy rules).
llvm::Expected<cuda::StridedIndex<2>> broadcastIndex2(const Node &n, llvm::ArrayRef<int64_t> out,
                                                      llvm::ArrayRef<int64_t> a,
                                                      llvm::ArrayRef<int64_t> b);

/// Pieces of one scratch buffer, each 256-byte aligned in memory (cuBLAS
/// and cuDNN want that; the executor promises 64): sizing reserves 255 bytes
/// of slack, placing rounds the base up. The same calls at creation (to size,
/// base null) and at run time (to place) give the same pieces.
class ScratchLayout {
public:
  explicit ScratchLayout(void *base = nullptr)
      : base_(base ? reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(base) + 255) &
                                              ~uintptr_t(255))
                   : nullptr) {}
  /// Reserves `bytes` and returns where they start (null when sizing).
  void *take(size_t bytes) {
    size_t at = (used_ + 255) / 256 * 256;
    used_ = at + bytes;
    return base_ ? base_ + at : nullptr;
  }
  template <typename T> T *take(int64_t count) {
    return static_cast<T *>(take((size_t)count * sizeof(T)));
  }
  /// What to ask for: the pieces plus the alignment slack (0 when empty).
  size_t bytes() const { return used_ ? used_ + 255 : 0; }

private:
  char *base_;
  size_t used_ = 0;
};

/// An asynchronous device-to-device copy (nothing when empty or aliased).
llvm::Error copyOnDevice(void *to, const void *from, size_t bytes, cudaStream_t stream);

/// `from` into `to`, two views of one NCHW shape, each in its own element
/// type and layout (plain or channels-last; 4-D where they differ): a Cast
/// where the layouts agree (a copy where the types do too), a transpose that
/// converts on the way where they differ (LayoutDevice.h). Nothing when both
/// are the same bytes.
llvm::Error convertTensor(const TensorView &from, const TensorView &to, cudaStream_t stream);

} // namespace graphc
