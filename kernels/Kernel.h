//===- Kernel.h - The interface every kernel implements ----------*- C++ -*-===//
//
// A kernel is created once per node, when the executor binds a placed graph
// (shapes are static by then, so it may prepare primitives, pick algorithms
// and size its scratch memory), and run once per step. It reads its inputs and
// writes outputs that the executor has already allocated from the device's
// arena; it never allocates tensors itself and never edits the graph.
//
// Layouts: tensors are plain row-major (NCHW) unless a kernel says it accepts
// or produces the blocked layout: oneDNN's nChw<B>c, 4-D f32 whose channel
// count is a multiple of B, the same number of bytes. B is not ours to fix:
// the CPU backend asks oneDNN which block its convolutions compute in on the
// CPU at hand (16 with AVX-512, 8 with AVX2; kernels/cpu/BlockedLayout.h).
// On GPUs the other layout is channels-last (NHWC of a 4-D tensor's NCHW
// shape: the channels innermost; kernels/ChannelsLast.h), which cuDNN's
// 16-bit tensor-core convolutions compute in. CPU devices may also keep
// channels-last values, where their policy says (kernels/ChannelsLast.h: the
// bf16 ones on a CPU with AMX). Each value has at most one layout besides
// plain, a function of its device's kind, its type and the policies: the
// executor chooses between that and plain from what producer and consumers
// accept and prefer, so chains of convolutions, batch norms, activations and
// pools stay in the convolutions' layout.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DeviceId.h"
#include "ir/Module.h"
#include "kernels/ChannelsLast.h"
#include "kernels/DeviceStep.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace graphc {

enum class Layout : unsigned char { Plain, Blocked, ChannelsLast };
/// "in the plain layout", "in the blocked layout", "channels-last": for
/// messages ("operand 1 cannot be ...").
llvm::StringRef layoutName(Layout l);

/// A library primitive a kernel ran: its kind ("convolution", "reorder", ...)
/// and the library's name for the implementation it chose on this CPU
/// (oneDNN's implementation string: "jit:avx2", "brgconv:avx512_core",
/// "ref:any", ...).
struct PrimitiveInfo {
  std::string kind, implementation;
};

/// The layout copies (reorders) a kernel ran to stage its operands, results
/// and kept weights in the formats its primitives want, and their bytes.
struct ReorderCount {
  int64_t reorders = 0, bytes = 0;
};

/// A tensor the executor owns, as a kernel sees it.
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  Dims shape;
  Layout layout = Layout::Plain;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t bytes() const { return (size_t)numElements() * dtypeSize(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// Gives update ops (Assign, Apply*) the storage of the variables they write,
/// on the device they run on.
class VariableAccess {
public:
  virtual ~VariableAccess() = default;
  virtual llvm::Expected<TensorView> variable(llvm::StringRef name) = 0;
};

struct KernelContext {
  llvm::ArrayRef<TensorView> inputs;
  llvm::ArrayRef<TensorView> outputs;
  void *scratch = nullptr; ///< scratchBytes() bytes, 64-byte aligned
  uint64_t step = 0;       ///< training step, for per-step randomness
  /// Gradient accumulation: which micro-batch of the step's update this run
  /// computes (0 without accumulation), for per-micro-batch randomness.
  uint64_t microStep = 0;
  /// The same two numbers in the device's own memory (DeviceStep.h), filled
  /// in by devices that keep them there (CUDA); null elsewhere and for
  /// kernels run outside an executor, which then read step and microStep.
  const DeviceStep *deviceStep = nullptr;
  VariableAccess *variables = nullptr;
  /// 0 when nodes of the graph write variables (training). Otherwise no
  /// step changes them and this number changes only when one is written
  /// from outside (Executor::writeVariable): a kernel may keep what it
  /// derives from variables (reordered weights) while it stays the same.
  uint64_t variablesVersion = 0;
  void *stream = nullptr; ///< the backend's stream for this device (dnnl::stream*, cudaStream_t)
};

class Kernel {
public:
  virtual ~Kernel();
  virtual llvm::Error run(KernelContext &ctx) = 0;

  /// Scratch memory per run, taken from the device arena.
  virtual size_t scratchBytes() const { return 0; }
  /// Whether operand `i` may arrive in layout `l` (default: plain only).
  virtual bool acceptsLayout(unsigned i, Layout l) const { return l == Layout::Plain; }
  /// Whether result `i` may be produced in layout `l` (default: plain only).
  virtual bool producesLayout(unsigned i, Layout l) const { return l == Layout::Plain; }
  /// The layout in which the kernel computes operand or result `i` without
  /// staging a copy, where it has one of its own (a convolution whose library
  /// chose the formats for this CPU). Default: none; the kernel follows.
  virtual std::optional<Layout> preferredOperandLayout(unsigned i) const { return std::nullopt; }
  virtual std::optional<Layout> preferredResultLayout(unsigned i) const { return std::nullopt; }
  /// The library primitives this kernel has run so far, each kind and
  /// implementation once (tests check that no hot one is a slow reference
  /// implementation; profiles show them). Default: none.
  virtual std::vector<PrimitiveInfo> primitivesRun() const { return {}; }
  /// Every reorder it has run so far (default: none).
  virtual ReorderCount reordersRun() const { return {}; }
  /// An operand whose buffer result 0 may overwrite (elementwise ops), if any.
  virtual std::optional<unsigned> inPlaceOperand() const { return std::nullopt; }
  /// True for kernels whose work is the same on any layout (elementwise ops):
  /// then all of its operands and results carry one layout, chosen together.
  /// Others (oneDNN layers) may take and give each tensor in its own layout.
  virtual bool layoutFollowsOperands() const { return false; }
  /// Fused variable updates (a multi-tensor optimizer step): kernels that can
  /// run as one launch with others return a key, and kernels of one device
  /// with equal non-empty keys may be run together through runGroup() on any
  /// one of them, once all their operands are ready. Default: not fusable.
  virtual std::string fusionKey() const { return {}; }
  /// Runs every kernel of `group` (which holds this one; all share its
  /// fusionKey) with its own context, with the effect of running them one
  /// after another. Default: exactly that.
  virtual llvm::Error runGroup(llvm::ArrayRef<Kernel *> group,
                               llvm::ArrayRef<KernelContext *> contexts);
  /// Tells the kernel the layouts the executor chose (one per operand and per
  /// result), once, before scratchBytes() is read for planning and before the
  /// first run. Kernels whose primitives or scratch depend on layouts build
  /// them here; without this call they size scratch for every layout they
  /// accept and build on first run. Default: nothing to do.
  virtual llvm::Error prepare(llvm::ArrayRef<Layout> operands, llvm::ArrayRef<Layout> results) {
    return llvm::Error::success();
  }
};

/// What a kernel factory needs to know about where it will run.
/// How CPU convolutions compute (graphrun --conv-algorithm). Auto: Winograd
/// where it pays (kernels/cpu/Conv.cpp says which): oneDNN's F(4x4, 3x3),
/// which oneDNN 2.6 has for f32 on AVX-512 only and 3.x nowhere, or our own
/// F(4, K) (kernels/cpu/ConvWinograd1d.h) for 1xK, Kx1 and the 3x3s oneDNN's
/// does not take; direct elsewhere, in bf16, and for channels-last
/// activations; Winograd: wherever one of them takes the convolution;
/// Direct: never. The choice follows from shapes alone, so a run is as
/// reproducible as with Direct.
enum class ConvAlgorithm : unsigned char { Auto, Direct, Winograd };
llvm::Expected<ConvAlgorithm> parseConvAlgorithm(llvm::StringRef s);
llvm::StringRef convAlgorithmName(ConvAlgorithm a);

struct KernelEnv {
  DeviceKind kind = DeviceKind::CPU;
  int threads = 1;         ///< the device's thread budget (CPU)
  uint64_t seed = 0;       ///< the run's seed
  void *backend = nullptr; ///< backend state (the CPU engine, CUDA handles)
  ConvAlgorithm convAlgorithm = ConvAlgorithm::Auto;
  /// Which GPU values may be channels-last (GPU kernels: whether a
  /// convolution computes in NHWC).
  GpuLayout gpuLayout = GpuLayout::Auto;
  /// Which CPU values are channels-last rather than blocked (CPU kernels:
  /// the layout a convolution computes its activations in).
  CpuLayout cpuLayout = CpuLayout::Auto;
};

using KernelFactory =
    std::function<llvm::Expected<std::unique_ptr<Kernel>>(const Node &, const KernelEnv &)>;

/// The dtype a node's kernel is keyed by: its first operand's, else its first
/// result's.
DType kernelDType(const Node &n);

/// Kernels keyed by (op, device kind, dtype). Backends register theirs in one
/// function each, register<Name>Kernels, which global() calls for every
/// backend the build links (Backends.def, cmake/Dependencies.cmake).
class KernelRegistry {
public:
  /// The registry with every built-in CPU kernel.
  static KernelRegistry &global();

  void add(Op op, DeviceKind kind, DType dtype, KernelFactory f);
  /// Same factory for several dtypes.
  void add(Op op, DeviceKind kind, std::initializer_list<DType> dtypes, const KernelFactory &f);
  const KernelFactory *find(Op op, DeviceKind kind, DType dtype) const;
  bool supports(const Node &n, DeviceKind kind) const;
  /// Device kinds that have a kernel for the node.
  std::vector<DeviceKind> kindsFor(const Node &n) const;
  /// Creates the node's kernel; an error names the node, op, dtype and the
  /// device kinds that could run it.
  llvm::Expected<std::unique_ptr<Kernel>> create(const Node &n, const KernelEnv &env) const;

private:
  std::vector<KernelFactory> table_; // indexed by (op, kind, dtype)
};

/// Defines a factory that constructs `KernelT(node, env)`.
template <typename KernelT> KernelFactory makeFactory() {
  return [](const Node &n, const KernelEnv &env) -> llvm::Expected<std::unique_ptr<Kernel>> {
    return std::make_unique<KernelT>(n, env);
  };
}

} // namespace graphc
