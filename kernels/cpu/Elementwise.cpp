//===- Elementwise.cpp - Arithmetic, activations and their gradients ------===//
//
// Add, Sub, Mul, Div with numpy broadcasting; the unary activations and math
// functions; the activation gradients (ReluGrad(y, dy), LeakyReluGrad(x, dy),
// SigmoidGrad(y, dy), TanhGrad(y, dy), ClipGrad(x, dy), and ErfGrad, GeluGrad,
// HardSigmoidGrad, HardSwishGrad of (x, dy)); AddN. Gelu, HardSwish and their
// gradients are PyTorch 1.13's formulas, kinks included: HardSwish' is
// x/3 + 1/2 on [-3, 3) (-1/2 at -3) and 1 from 3 on, as PyTorch's vectorised
// kernel computes the bulk of every tensor (its scalar tail, and float64, give
// 3/2 at 3: PyTorch disagrees with itself there); HardSigmoid' is alpha
// strictly inside (0, 1) and 0 at the ends. The CUDA bodies
// (kernels/cuda/ElementwiseDevice.h) repeat them.
//
// f32 is computed directly; f16 and bf16 in f32 over short chunks; i64 and
// i32 for Add, Sub, Mul, Neg and AddN (shape arithmetic). Operands are walked
// through a collapsed LoopNest, so same-shape, scalar and per-channel
// broadcasts are flat inner loops over contiguous memory that the compiler
// vectorises. Kernels whose operands all have the result's shape work on any
// layout (the blocked layout is a permutation of the same elements) and may
// write over an operand in place.
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "kernels/cpu/BlockedLayout.h"
#include "kernels/cpu/PlainLoops.h"

#include <cmath>
#include <limits>

namespace graphc {
namespace {

using namespace plain;

llvm::Error layoutMismatch(const Node &n) {
  return nodeError(n, "operands and results arrive in different layouts; an elementwise kernel "
                      "needs them all in one layout");
}

//===-- Binary -------------------------------------------------------------===//

struct AddFn {
  template <typename T> T operator()(T a, T b) const { return a + b; }
};
struct SubFn {
  template <typename T> T operator()(T a, T b) const { return a - b; }
};
struct MulFn {
  template <typename T> T operator()(T a, T b) const { return a * b; }
};
struct DivFn {
  template <typename T> T operator()(T a, T b) const { return a / b; }
};
// Activation gradients: (saved forward value, incoming gradient).
struct ReluGradFn {
  float operator()(float y, float dy) const { return y > 0 ? dy : 0.0f; }
};
struct LeakyReluGradFn {
  float alpha;
  float operator()(float x, float dy) const { return x > 0 ? dy : alpha * dy; }
};
struct SigmoidGradFn {
  float operator()(float y, float dy) const { return dy * y * (1 - y); }
};
struct TanhGradFn {
  float operator()(float y, float dy) const { return dy * (1 - y * y); }
};
struct ClipGradFn {
  float lo, hi;
  float operator()(float x, float dy) const { return x >= lo && x <= hi ? dy : 0.0f; }
};

// The constants of erf and Gelu, rounded to float once.
constexpr float kTwoOverSqrtPi = 1.12837916709551257f; // erf'(0)
constexpr float kSqrtHalf = 0.707106781186547524f;
constexpr float kInvSqrtTwoPi = 0.398942280401432678f; // the normal density at 0
constexpr float kSqrtTwoOverPi = 0.797884560802865356f;
constexpr float kGeluCubic = 0.044715f;

struct ErfGradFn {
  float operator()(float x, float dy) const { return dy * (kTwoOverSqrtPi * std::exp(-x * x)); }
};
struct GeluGradFn {
  bool tanh;
  float operator()(float x, float dy) const {
    if (tanh) {
      float t = std::tanh(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x));
      float inner = kSqrtTwoOverPi * (1.0f + 3.0f * kGeluCubic * x * x);
      return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * inner);
    }
    float cdf = 0.5f * (1.0f + std::erf(x * kSqrtHalf));
    float pdf = kInvSqrtTwoPi * std::exp(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
};
struct HardSigmoidGradFn {
  float alpha, beta;
  float operator()(float x, float dy) const {
    float t = alpha * x + beta;
    return t > 0 && t < 1 ? dy * alpha : 0.0f;
  }
};
struct HardSwishGradFn {
  float operator()(float x, float dy) const {
    return x < -3.0f ? 0.0f : x >= 3.0f ? dy : dy * (x / 3.0f + 0.5f);
  }
};

/// One run of a binary op; operand strides are 0 (broadcast) or 1. The
/// functor comes by value so its parameters cannot alias the output.
template <typename T, typename F>
void binaryRun(T *o, const T *a, int64_t sa, const T *b, int64_t sb, int64_t n, F f) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i)
      o[i] = f(a[i], b[i]);
  } else if (sa) {
    const T bv = *b;
    for (int64_t i = 0; i < n; ++i)
      o[i] = f(a[i], bv);
  } else if (sb) {
    const T av = *a;
    for (int64_t i = 0; i < n; ++i)
      o[i] = f(av, b[i]);
  } else {
    std::fill(o, o + n, f(*a, *b));
  }
}

template <typename S, typename F>
void binaryRunHalf(S *o, const S *a, int64_t sa, const S *b, int64_t sb, int64_t n, F f) {
  if constexpr (std::is_same_v<S, BFloat> && std::is_same_v<F, ReluGradFn>) {
    if (sa && sb)
      return reluGradBf16(o, a, b, n);
  }
  float fa[kChunk], fb[kChunk], fo[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    int64_t m = std::min(kChunk, n - i);
    loadFloats(fa, a + i * sa, sa, m);
    loadFloats(fb, b + i * sb, sb, m);
    binaryRun(fo, fa, sa, fb, sb, m, f);
    storeFloats(o + i, fo, m);
  }
}

/// A binary elementwise op. `Ints`: also i64/i32. `GradOrder`: an
/// activation gradient (both operands have the result's shape; dy, operand 1,
/// is the one to overwrite).
template <typename F, bool Ints, bool GradOrder = false> class BinaryKernel : public Kernel {
public:
  BinaryKernel(const Node &n, const KernelEnv &, F fn = F())
      : node_(&n), fn_(fn), dtype_(n.result()->type().dtype) {
    const TensorType &out = n.result()->type();
    Dims a(n.operand(0)->type().shape), b(n.operand(1)->type().shape);
    nest_ = broadcastNest(out.shape, {a, b});
    sameShape_[0] = n.operand(0)->type() == out;
    sameShape_[1] = n.operand(1)->type() == out;
  }

  llvm::Error run(KernelContext &ctx) override {
    if (!sameLayout(ctx))
      return layoutMismatch(*node_);
    int64_t sa = nest_.innerStride(0), sb = nest_.innerStride(1);
    auto body = [&](auto tag) {
      using T = typename decltype(tag)::type;
      T *o = ctx.outputs[0].as<T>();
      const T *a = ctx.inputs[0].as<const T>(), *b = ctx.inputs[1].as<const T>();
      parallelFor(nest_.numElements(), kGrain, [&](int64_t begin, int64_t end) {
        nest_.forEachRun(begin, end, [&](int64_t pos, const int64_t *off, int64_t len) {
          if constexpr (isHalfLike<T>)
            binaryRunHalf(o + pos, a + off[0], sa, b + off[1], sb, len, fn_);
          else
            binaryRun(o + pos, a + off[0], sa, b + off[1], sb, len, fn_);
        });
      });
    };
    if constexpr (Ints)
      visitNumeric(dtype_, body);
    else
      visitFloat(dtype_, body);
    return llvm::Error::success();
  }

  bool acceptsLayout(unsigned, Layout l) const override { return fits(l); }
  bool producesLayout(unsigned, Layout l) const override { return fits(l); }
  bool layoutFollowsOperands() const override { return true; }
  std::optional<unsigned> inPlaceOperand() const override {
    unsigned first = GradOrder ? 1 : 0;
    if (sameShape_[first])
      return first;
    if (sameShape_[1 - first])
      return 1 - first;
    return std::nullopt;
  }

private:
  const Node *node_;
  F fn_;
  DType dtype_;
  LoopNest nest_;
  bool sameShape_[2] = {false, false};

  /// Without broadcasting, any layout the result fits in.
  bool fits(Layout l) const {
    return l == Layout::Plain ||
           (sameShape_[0] && sameShape_[1] && cpuLayoutFits(node_->result()->type(), l));
  }
};

//===-- Unary --------------------------------------------------------------===//

struct ReluFn {
  float operator()(float x) const { return x < 0 ? 0.0f : x; }
};
struct LeakyReluFn {
  float alpha;
  float operator()(float x) const { return x < 0 ? alpha * x : x; }
};
struct SigmoidFn {
  float operator()(float x) const { return 1.0f / (1.0f + std::exp(-x)); }
};
struct TanhFn {
  float operator()(float x) const { return std::tanh(x); }
};
struct ExpFn {
  float operator()(float x) const { return std::exp(x); }
};
struct LogFn {
  float operator()(float x) const { return std::log(x); }
};
struct SqrtFn {
  float operator()(float x) const { return std::sqrt(x); }
};
struct NegFn {
  template <typename T> T operator()(T x) const { return -x; }
};
struct ClipFn {
  float lo, hi;
  float operator()(float x) const { return std::min(std::max(x, lo), hi); }
};

struct ErfFn {
  float operator()(float x) const { return std::erf(x); }
};
struct GeluFn {
  bool tanh;
  float operator()(float x) const {
    if (tanh)
      return 0.5f * x * (1.0f + std::tanh(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x)));
    return 0.5f * x * (1.0f + std::erf(x * kSqrtHalf));
  }
};
struct HardSigmoidFn {
  float alpha, beta;
  float operator()(float x) const { return std::min(std::max(alpha * x + beta, 0.0f), 1.0f); }
};
struct HardSwishFn {
  float operator()(float x) const { return x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
};

template <typename T, typename F> void unaryRun(T *o, const T *a, int64_t n, F f) {
  if constexpr (std::is_same_v<T, BFloat> && std::is_same_v<F, ReluFn>) {
    reluBf16(o, a, n);
  } else if constexpr (isHalfLike<T>) {
    float fa[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      int64_t m = std::min(kChunk, n - i);
      loadFloats(fa, a + i, 1, m);
      unaryRun(fa, fa, m, f);
      storeFloats(o + i, fa, m);
    }
  } else {
    for (int64_t i = 0; i < n; ++i)
      o[i] = f(a[i]);
  }
}

template <typename F, bool Ints = false> class UnaryKernel : public Kernel {
public:
  UnaryKernel(const Node &n, const KernelEnv &, F fn = F())
      : node_(&n), fn_(fn), dtype_(n.result()->type().dtype) {}

  llvm::Error run(KernelContext &ctx) override {
    if (!sameLayout(ctx))
      return layoutMismatch(*node_);
    auto body = [&](auto tag) {
      using T = typename decltype(tag)::type;
      T *o = ctx.outputs[0].as<T>();
      const T *a = ctx.inputs[0].as<const T>();
      parallelFor(ctx.outputs[0].numElements(), kGrain, [&](int64_t begin, int64_t end) {
        unaryRun(o + begin, a + begin, end - begin, fn_);
      });
    };
    if constexpr (Ints)
      visitNumeric(dtype_, body);
    else
      visitFloat(dtype_, body);
    return llvm::Error::success();
  }

  // Elementwise on one operand: any layout, as long as the result matches.
  bool acceptsLayout(unsigned, Layout) const override { return true; }
  bool producesLayout(unsigned, Layout) const override { return true; }
  bool layoutFollowsOperands() const override { return true; }
  std::optional<unsigned> inPlaceOperand() const override { return 0; }

private:
  const Node *node_;
  F fn_;
  DType dtype_;
};

//===-- AddN ---------------------------------------------------------------===//

class AddNKernel : public Kernel {
public:
  AddNKernel(const Node &n, const KernelEnv &) : node_(&n), dtype_(n.result()->type().dtype) {}

  llvm::Error run(KernelContext &ctx) override {
    if (!sameLayout(ctx))
      return layoutMismatch(*node_);
    size_t count = ctx.inputs.size();
    visitNumeric(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T *o = ctx.outputs[0].as<T>();
      parallelFor(ctx.outputs[0].numElements(), kGrain, [&](int64_t begin, int64_t end) {
        // Chunks keep the partial sum in cache while every operand streams by once.
        for (int64_t c = begin; c < end; c += kChunk) {
          int64_t m = std::min(kChunk, end - c);
          if constexpr (isHalfLike<T>) {
            float acc[kChunk], next[kChunk];
            loadFloats(acc, ctx.inputs[0].as<const T>() + c, 1, m);
            for (size_t k = 1; k < count; ++k) {
              if constexpr (std::is_same_v<T, BFloat>) {
                addBf16(acc, ctx.inputs[k].as<const T>() + c, m);
                continue;
              }
              loadFloats(next, ctx.inputs[k].as<const T>() + c, 1, m);
              for (int64_t i = 0; i < m; ++i)
                acc[i] += next[i];
            }
            storeFloats(o + c, acc, m);
          } else {
            const T *first = ctx.inputs[0].as<const T>() + c;
            if (count == 1) {
              if (o + c != first)
                std::memcpy(o + c, first, m * sizeof(T));
              continue;
            }
            const T *second = ctx.inputs[1].as<const T>() + c;
            for (int64_t i = 0; i < m; ++i)
              o[c + i] = first[i] + second[i];
            for (size_t k = 2; k < count; ++k) {
              const T *in = ctx.inputs[k].as<const T>() + c;
              for (int64_t i = 0; i < m; ++i)
                o[c + i] += in[i];
            }
          }
        }
      });
    });
    return llvm::Error::success();
  }

  bool acceptsLayout(unsigned, Layout l) const override {
    return cpuLayoutFits(node_->result()->type(), l);
  }
  bool producesLayout(unsigned, Layout l) const override {
    return cpuLayoutFits(node_->result()->type(), l);
  }
  bool layoutFollowsOperands() const override { return true; }
  std::optional<unsigned> inPlaceOperand() const override { return 0; }

private:
  const Node *node_;
  DType dtype_;
};

//===-- Registration -------------------------------------------------------===//

float alphaOf(const Node &n) {
  return (float)n.attrs().getFloat("alpha", 0.01);
}
float clipMin(const Node &n) {
  return (float)n.attrs().getFloat("min", -std::numeric_limits<double>::infinity());
}
float clipMax(const Node &n) {
  return (float)n.attrs().getFloat("max", std::numeric_limits<double>::infinity());
}
bool geluTanh(const Node &n) {
  return n.attrs().getString("approximate", "none") == "tanh";
}
/// HardSigmoid's alpha and beta, ONNX's defaults.
float hardAlpha(const Node &n) {
  return (float)n.attrs().getFloat("alpha", 0.2);
}
float hardBeta(const Node &n) {
  return (float)n.attrs().getFloat("beta", 0.5);
}

/// A factory for kernel K whose functor is made from the node.
template <typename K, typename MakeFn> KernelFactory withFn(MakeFn make) {
  return [make](const Node &n, const KernelEnv &env) -> llvm::Expected<std::unique_ptr<Kernel>> {
    return std::make_unique<K>(n, env, make(n));
  };
}

} // namespace

void registerCpuElementwiseKernels(KernelRegistry &r) {
  const auto cpu = DeviceKind::CPU;
  auto floats = {DType::F32, DType::F16, DType::BF16};
  auto numeric = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32};

  r.add(Op::Add, cpu, numeric, makeFactory<BinaryKernel<AddFn, true>>());
  r.add(Op::Sub, cpu, numeric, makeFactory<BinaryKernel<SubFn, true>>());
  r.add(Op::Mul, cpu, numeric, makeFactory<BinaryKernel<MulFn, true>>());
  r.add(Op::Div, cpu, floats, makeFactory<BinaryKernel<DivFn, false>>());

  r.add(Op::Relu, cpu, floats, makeFactory<UnaryKernel<ReluFn>>());
  r.add(Op::LeakyRelu, cpu, floats,
        withFn<UnaryKernel<LeakyReluFn>>([](const Node &n) { return LeakyReluFn{alphaOf(n)}; }));
  r.add(Op::Sigmoid, cpu, floats, makeFactory<UnaryKernel<SigmoidFn>>());
  r.add(Op::Tanh, cpu, floats, makeFactory<UnaryKernel<TanhFn>>());
  r.add(Op::Exp, cpu, floats, makeFactory<UnaryKernel<ExpFn>>());
  r.add(Op::Log, cpu, floats, makeFactory<UnaryKernel<LogFn>>());
  r.add(Op::Sqrt, cpu, floats, makeFactory<UnaryKernel<SqrtFn>>());
  r.add(Op::Neg, cpu, numeric, makeFactory<UnaryKernel<NegFn, true>>());
  r.add(Op::Clip, cpu, floats, withFn<UnaryKernel<ClipFn>>([](const Node &n) {
          return ClipFn{clipMin(n), clipMax(n)};
        }));
  r.add(Op::Erf, cpu, floats, makeFactory<UnaryKernel<ErfFn>>());
  r.add(Op::Gelu, cpu, floats,
        withFn<UnaryKernel<GeluFn>>([](const Node &n) { return GeluFn{geluTanh(n)}; }));
  r.add(Op::HardSigmoid, cpu, floats, withFn<UnaryKernel<HardSigmoidFn>>([](const Node &n) {
          return HardSigmoidFn{hardAlpha(n), hardBeta(n)};
        }));
  r.add(Op::HardSwish, cpu, floats, makeFactory<UnaryKernel<HardSwishFn>>());

  using GradReluK = BinaryKernel<ReluGradFn, false, true>;
  using GradLeakyK = BinaryKernel<LeakyReluGradFn, false, true>;
  using GradClipK = BinaryKernel<ClipGradFn, false, true>;
  r.add(Op::ReluGrad, cpu, floats, makeFactory<GradReluK>());
  r.add(Op::LeakyReluGrad, cpu, floats,
        withFn<GradLeakyK>([](const Node &n) { return LeakyReluGradFn{alphaOf(n)}; }));
  r.add(Op::SigmoidGrad, cpu, floats, makeFactory<BinaryKernel<SigmoidGradFn, false, true>>());
  r.add(Op::TanhGrad, cpu, floats, makeFactory<BinaryKernel<TanhGradFn, false, true>>());
  r.add(Op::ClipGrad, cpu, floats, withFn<GradClipK>([](const Node &n) {
          return ClipGradFn{clipMin(n), clipMax(n)};
        }));
  using GradGeluK = BinaryKernel<GeluGradFn, false, true>;
  using GradHardSigmoidK = BinaryKernel<HardSigmoidGradFn, false, true>;
  r.add(Op::ErfGrad, cpu, floats, makeFactory<BinaryKernel<ErfGradFn, false, true>>());
  r.add(Op::GeluGrad, cpu, floats,
        withFn<GradGeluK>([](const Node &n) { return GeluGradFn{geluTanh(n)}; }));
  r.add(Op::HardSigmoidGrad, cpu, floats, withFn<GradHardSigmoidK>([](const Node &n) {
          return HardSigmoidGradFn{hardAlpha(n), hardBeta(n)};
        }));
  r.add(Op::HardSwishGrad, cpu, floats, makeFactory<BinaryKernel<HardSwishGradFn, false, true>>());

  r.add(Op::AddN, cpu, numeric, makeFactory<AddNKernel>());
}

} // namespace graphc
