//===- DnnlKernel.h - What the oneDNN-backed kernels share ------*- C++ -*-===//
//
// The oneDNN kernels (Conv.cpp, Pool.cpp, BatchNorm.cpp, MatMul.cpp) build
// their primitive descriptors once, when the kernel is created, and run the
// primitives per step. This header gives them one shape:
//
//  - DnnlKernel, the base class, guarantees that
//    1. oneDNN exceptions come back as llvm::Errors naming the node;
//    2. primitives are created and run under the same OpenMP thread count
//       (the device's budget): oneDNN sizes per-thread scratch and splits
//       work when it creates a primitive, so running it with more threads
//       than it was made for is unsafe;
//    3. oneDNN's scratchpad is user-managed and comes out of the kernel's
//       scratch memory, so the executor's memory plan sees every byte;
//    4. a run never uses more scratch than scratchBytes() said (checked);
//    5. a node with an empty operand or result (a tower that got no samples)
//       builds no primitive (oneDNN 2.6 divides by zero on some) and its run
//       zero-fills its results: the sum over nothing for gradients and
//       products, and 0 as the statistics of an empty batch.
//
//  - Staging moves a value between the layout of the executor's view and the
//    layout a primitive computes in. When they agree the primitive reads or
//    writes the view itself; otherwise the value is reordered through scratch
//    (operands before the primitive, results after). Weights are reordered
//    every run that needs them and never cached across runs: they change
//    every training step.
//
// Kernels are not re-entrant: one run at a time per kernel object.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cpu/CpuBackend.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace graphc {

/// Sets the calling thread's OpenMP budget for a scope and restores it.
class ThreadScope {
public:
  explicit ThreadScope(int threads);
  ~ThreadScope();
  ThreadScope(const ThreadScope &) = delete;
  ThreadScope &operator=(const ThreadScope &) = delete;

private:
  int saved_;
};

/// Scratch sizes are rounded to this so every piece stays 64-byte aligned.
inline size_t roundScratch(size_t bytes) {
  return (bytes + 63) / 64 * 64;
}

/// A plain (row-major) descriptor of any rank, scalars as [1].
dnnl::memory::desc plainDesc(llvm::ArrayRef<int64_t> dims, DType dtype = DType::F32);
/// The descriptor of a tensor of type `t` (f32 or bf16) in layout `l`.
dnnl::memory::desc layoutDesc(const TensorType &t, Layout l);
/// The descriptor of a view in its own layout.
inline dnnl::memory::desc viewDesc(const TensorView &v) {
  return layoutDesc(TensorType(v.dtype, v.shape), v.layout);
}

/// Caches reorder primitives by (source, destination) descriptor.
class ReorderCache {
public:
  dnnl::reorder &get(const dnnl::memory::desc &from, const dnnl::memory::desc &to);

private:
  struct Entry {
    dnnl::memory::desc from, to;
    dnnl::reorder prim;
  };
  std::vector<Entry> entries_;
};

/// The primitives a kernel has run, each (kind, implementation) once.
class PrimitiveLog {
public:
  void note(const dnnl::primitive &p);
  /// A computation of our own (not a oneDNN primitive), each once.
  void note(PrimitiveInfo info);
  const std::vector<PrimitiveInfo> &entries() const { return entries_; }
  void countReorder(size_t bytes) {
    ++reorders_.reorders;
    reorders_.bytes += (int64_t)bytes;
  }
  const ReorderCount &reorders() const { return reorders_; }

private:
  ReorderCount reorders_;
  std::vector<const_dnnl_primitive_t> seen_;
  std::vector<PrimitiveInfo> entries_;
};

/// Hands out the kernel's scratch memory in aligned pieces and runs the
/// kernel's primitives (and the reorders it stages through) on its stream.
class Staging {
public:
  Staging(void *scratch, size_t capacity, ReorderCache &reorders, dnnl::stream &stream,
          PrimitiveLog &log)
      : base_(static_cast<unsigned char *>(scratch)), capacity_(capacity), reorders_(reorders),
        stream_(stream), log_(log) {}

  /// The scratch bytes read() or write() takes for a value held in `have`
  /// that a primitive wants in `want`.
  static size_t bytes(const dnnl::memory::desc &have, const dnnl::memory::desc &want) {
    return have == want ? 0 : roundScratch(want.get_size());
  }

  /// Memory a primitive reads: `data` (held in `have`) itself, or a copy in
  /// `want` made now.
  dnnl::memory read(void *data, const dnnl::memory::desc &have, const dnnl::memory::desc &want);
  dnnl::memory read(const TensorView &v, const dnnl::memory::desc &want) {
    return read(v.data, viewDesc(v), want);
  }
  /// Memory a primitive writes: `data` itself, or a buffer in `want` that
  /// finish() reorders into `data`.
  dnnl::memory write(void *data, const dnnl::memory::desc &have, const dnnl::memory::desc &want);
  dnnl::memory write(const TensorView &v, const dnnl::memory::desc &want) {
    return write(v.data, viewDesc(v), want);
  }
  /// Scratch memory for the primitive's own use (scratchpad, workspace).
  dnnl::memory temp(const dnnl::memory::desc &d);
  /// Reorders `data` (held in `have`) into `to`, memory that outlives the run.
  void reorderInto(void *data, const dnnl::memory::desc &have, dnnl::memory &to);
  /// Copies staged results into their views and waits for the stream.
  void finish();
  /// Runs a primitive on the kernel's stream (and notes which one ran).
  void execute(const dnnl::primitive &p, const std::unordered_map<int, dnnl::memory> &args);

  dnnl::stream &stream() { return stream_; }
  const dnnl::engine &engine() const { return CpuBackend::instance().engine(); }

private:
  void *take(size_t bytes);

  unsigned char *base_;
  size_t capacity_, used_ = 0;
  ReorderCache &reorders_;
  dnnl::stream &stream_;
  PrimitiveLog &log_;
  struct Pending {
    dnnl::memory from, to;
  };
  llvm::SmallVector<Pending, 2> pending_;
};

/// How many layouts there are (arrays indexed by Layout).
constexpr size_t kLayoutCount = 3;

/// The layouts of one run: one per operand, one per result.
struct Layouts {
  llvm::SmallVector<Layout, 5> in, out;
};

/// An operand no step changes (weights of a graph that updates no variable,
/// KernelContext::variablesVersion), reordered into the layout a primitive
/// wants once per variables version and kept between runs, instead of on
/// every run. The kept copy is host memory counted against --memory-limit.
class KeptOperand {
public:
  KeptOperand() = default;
  KeptOperand(const KeptOperand &) = delete;
  KeptOperand &operator=(const KeptOperand &) = delete;
  ~KeptOperand();
  /// Whether `node`'s operand `i` is a variable or a constant.
  static bool isStable(const Node &node, unsigned i);
  /// `data` in `want`: the kept copy (refreshed when `version` or `data`
  /// moved), or, with version 0, a copy staged for this run.
  llvm::Expected<dnnl::memory> get(Staging &s, void *data, const dnnl::memory::desc &have,
                                   const dnnl::memory::desc &want, uint64_t version);
  /// The kept buffer of `want`, which `fill` computes from `data` when
  /// `version` or `data` moved (a version above 0; `what` names it where
  /// --memory-limit refuses it).
  llvm::Expected<dnnl::memory> keep(const void *data, const dnnl::memory::desc &want,
                                    uint64_t version, llvm::function_ref<void(dnnl::memory &)> fill,
                                    const char *what);

private:
  dnnl::memory kept_;
  int64_t bytes_ = 0;
  uint64_t version_ = 0;
  const void *from_ = nullptr;
};

class DnnlKernel : public Kernel {
public:
  DnnlKernel(const Node &n, const KernelEnv &env);

  llvm::Error run(KernelContext &ctx) final;
  llvm::Error prepare(llvm::ArrayRef<Layout> operands, llvm::ArrayRef<Layout> results) final;
  size_t scratchBytes() const final;
  bool acceptsLayout(unsigned i, Layout l) const final;
  bool producesLayout(unsigned i, Layout l) const final;
  std::optional<Layout> preferredOperandLayout(unsigned i) const final { return preferIn_[i]; }
  std::optional<Layout> preferredResultLayout(unsigned i) const final { return preferOut_[i]; }
  std::vector<PrimitiveInfo> primitivesRun() const final { return log_.entries(); }
  ReorderCount reordersRun() const final { return log_.reorders(); }

  /// Builds the layout-independent part (primitive descriptors); an error
  /// names the node.
  llvm::Error init();

protected:
  const Node &node() const { return *node_; }
  const TensorType &operandType(unsigned i) const { return node_->operand(i)->type(); }
  const TensorType &resultType(unsigned i) const { return node_->result(i)->type(); }
  /// Lets operand or result `i` take the layout its type may take on this
  /// CPU besides plain (cpuActivationLayout: blocked, or channels-last).
  void allowActivationOperand(unsigned i);
  void allowActivationResult(unsigned i);
  /// The same, and records the layout that `chosen` (the format oneDNN
  /// picked for it) is, if it is one of ours, as the kernel's preference.
  void allowActivationOperand(unsigned i, const dnnl::memory::desc &chosen);
  void allowActivationResult(unsigned i, const dnnl::memory::desc &chosen);
  /// The layout besides plain that a value of type `t` may take here.
  std::optional<Layout> activationLayout(const TensorType &t) const {
    return cpuActivationLayout(t, cpuLayout_);
  }
  /// Plain, and activationLayout(t) where there is one: the layouts a
  /// kernel that computes in its operand's layout builds primitives for.
  llvm::SmallVector<Layout, 2> layoutsOf(const TensorType &t) const {
    llvm::SmallVector<Layout, 2> ls{Layout::Plain};
    if (auto l = activationLayout(t))
      ls.push_back(*l);
    return ls;
  }
  /// A primitive attribute with a user-managed scratchpad.
  static dnnl::primitive_attr userScratchpad();
  /// Records a computation of the kernel's own in primitivesRun().
  void noteOwnPrimitive(PrimitiveInfo info) { log_.note(std::move(info)); }
  /// The device's thread budget the kernel runs under.
  int threads() const { return threads_; }

  /// May throw dnnl::error; errors a user's graph causes come back as values.
  virtual llvm::Error build() = 0;
  /// The scratch a run with these layouts takes (Staging::bytes of every
  /// staged value plus temps, each rounded).
  virtual size_t scratchFor(const Layouts &ls) const = 0;
  /// Creates what a run with these layouts needs, ahead of the first run.
  virtual void prepareFor(const Layouts &ls) {}
  virtual void execute(KernelContext &ctx, Staging &s) = 0;
  /// Instead of build() and execute() for a node with an empty operand or
  /// result (default: nothing to build; zero-fill the results).
  virtual llvm::Error buildEmpty() { return llvm::Error::success(); }
  virtual void executeEmpty(KernelContext &ctx);

private:
  llvm::Error guard(llvm::function_ref<llvm::Error()> body);
  /// Every combination of layouts this kernel accepts.
  std::vector<Layouts> allLayouts() const;

  const Node *node_;
  int threads_;
  CpuLayout cpuLayout_;
  bool empty_ = false;
  /// Per operand and result, the layout besides plain it may take, if any.
  llvm::SmallVector<std::optional<Layout>, 5> altIn_, altOut_;
  llvm::SmallVector<std::optional<Layout>, 5> preferIn_, preferOut_;
  std::optional<Layouts> prepared_;
  mutable std::optional<size_t> scratch_; ///< scratchBytes(), once computed
  ReorderCache reorders_;
  PrimitiveLog log_;
};

/// A factory that constructs the kernel and runs its init().
template <typename KernelT> KernelFactory dnnlFactory() {
  return [](const Node &n, const KernelEnv &env) -> llvm::Expected<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<KernelT>(n, env);
    if (auto e = k->init())
      return e;
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

/// A primitive descriptor built eagerly (cheap) and its primitive created on
/// first use (oneDNN generates code then).
template <typename Prim> struct LazyPrimitive {
  typename Prim::primitive_desc pd;
  std::optional<Prim> prim;

  Prim &get() {
    if (!prim)
      prim.emplace(pd);
    return *prim;
  }
  size_t scratchpad() const { return roundScratch(pd.scratchpad_desc().get_size()); }
};

} // namespace graphc
