//===- Select.cpp - Comparisons, Not and Where -----------------------------===//
//
// Equal, Less and Greater compare two operands of one dtype (numpy
// broadcasting) into bool, one byte per element holding 0 or 1; Not negates a
// bool; Where(cond, a, b) copies a's element where cond is non-zero, else
// b's. They carry masks (an attention's padding, a comparison on data), so
// they stay plain and simple: each operand is walked through one broadcast
// LoopNest. f16 and bf16 compare in f32 (exact: both widen without loss);
// Where copies elements of any dtype as bytes.
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "kernels/cpu/PlainLoops.h"

#include <cstring>

namespace graphc {
namespace {

using namespace plain;

enum class Compare { Equal, Less, Greater };

Compare compareOf(Op op) {
  return op == Op::Equal ? Compare::Equal : op == Op::Less ? Compare::Less : Compare::Greater;
}

template <typename T> auto widened(T x) {
  if constexpr (isHalfLike<T>)
    return toFloat(x);
  else
    return x;
}

/// The nest of operands 0..k of `n` broadcast to its result.
LoopNest resultNest(const Node &n) {
  llvm::SmallVector<Dims, 3> shapes;
  for (const Value *v : n.operands())
    shapes.push_back(Dims(v->type().shape));
  return broadcastNest(n.result()->type().shape, shapes);
}

llvm::Error plainOnly(const Node &n) {
  return nodeError(n, "operands arrive in a blocked layout; this kernel reads plain tensors");
}

class CompareKernel : public Kernel {
public:
  CompareKernel(const Node &n, const KernelEnv &)
      : node_(&n), cmp_(compareOf(n.op())), dtype_(n.operand(0)->type().dtype),
        nest_(resultNest(n)) {}

  llvm::Error run(KernelContext &ctx) override {
    if (!sameLayout(ctx))
      return plainOnly(*node_);
    uint8_t *o = ctx.outputs[0].as<uint8_t>();
    int64_t sa = nest_.innerStride(0), sb = nest_.innerStride(1);
    visitNumeric(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *a = ctx.inputs[0].as<const T>(), *b = ctx.inputs[1].as<const T>();
      parallelFor(nest_.numElements(), kGrain, [&](int64_t begin, int64_t end) {
        nest_.forEachRun(begin, end, [&](int64_t pos, const int64_t *off, int64_t len) {
          const T *pa = a + off[0], *pb = b + off[1];
          for (int64_t i = 0; i < len; ++i) {
            auto x = widened(pa[i * sa]), y = widened(pb[i * sb]);
            bool r = cmp_ == Compare::Equal ? x == y : cmp_ == Compare::Less ? x < y : x > y;
            o[pos + i] = r;
          }
        });
      });
    });
    return llvm::Error::success();
  }

private:
  const Node *node_;
  Compare cmp_;
  DType dtype_;
  LoopNest nest_;
};

class NotKernel : public Kernel {
public:
  NotKernel(const Node &, const KernelEnv &) {}

  llvm::Error run(KernelContext &ctx) override {
    uint8_t *o = ctx.outputs[0].as<uint8_t>();
    const uint8_t *a = ctx.inputs[0].as<const uint8_t>();
    for (int64_t i = 0, n = ctx.outputs[0].numElements(); i < n; ++i)
      o[i] = a[i] == 0;
    return llvm::Error::success();
  }

  bool acceptsLayout(unsigned, Layout) const override { return true; }
  bool producesLayout(unsigned, Layout) const override { return true; }
  bool layoutFollowsOperands() const override { return true; }
  std::optional<unsigned> inPlaceOperand() const override { return 0; }
};

class WhereKernel : public Kernel {
public:
  WhereKernel(const Node &n, const KernelEnv &)
      : node_(&n), elemSize_(dtypeSize(n.result()->type().dtype)), nest_(resultNest(n)) {}

  llvm::Error run(KernelContext &ctx) override {
    if (!sameLayout(ctx))
      return plainOnly(*node_);
    char *o = ctx.outputs[0].as<char>();
    const uint8_t *c = ctx.inputs[0].as<const uint8_t>();
    const char *a = ctx.inputs[1].as<const char>(), *b = ctx.inputs[2].as<const char>();
    int64_t sc = nest_.innerStride(0), sa = nest_.innerStride(1), sb = nest_.innerStride(2);
    size_t es = elemSize_;
    parallelFor(nest_.numElements(), kGrain, [&](int64_t begin, int64_t end) {
      nest_.forEachRun(begin, end, [&](int64_t pos, const int64_t *off, int64_t len) {
        for (int64_t i = 0; i < len; ++i) {
          const char *src =
              c[off[0] + i * sc] ? a + (off[1] + i * sa) * es : b + (off[2] + i * sb) * es;
          std::memcpy(o + (pos + i) * es, src, es);
        }
      });
    });
    return llvm::Error::success();
  }

private:
  const Node *node_;
  size_t elemSize_;
  LoopNest nest_;
};

} // namespace

void registerCpuSelectKernels(KernelRegistry &r) {
  const auto cpu = DeviceKind::CPU;
  auto numeric = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32};
  for (Op op : {Op::Equal, Op::Less, Op::Greater})
    r.add(op, cpu, numeric, makeFactory<CompareKernel>());
  r.add(Op::Not, cpu, DType::Bool, makeFactory<NotKernel>());
  // Keyed by the condition's dtype; the values may be of any.
  r.add(Op::Where, cpu, DType::Bool, makeFactory<WhereKernel>());
}

} // namespace graphc
