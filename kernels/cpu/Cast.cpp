//===- Cast.cpp - Conversions between every pair of dtypes ----------------===//
//
// Cast {to}: like PyTorch's Tensor.to(dtype): floats to integers truncate
// toward zero, anything to bool is `!= 0`, bool to numbers is 0 or 1, and
// floats narrow to f16 / bf16 with round-to-nearest-even. 16-bit floats pass
// through f32, which holds them exactly. A cast to the same dtype is a copy
// that may happen in place. The same conversions widen and round the f16
// layers that CPUs compute through their f32 kernels (kernels/Float16ViaF32.h).
//
//===----------------------------------------------------------------------===//

#include "kernels/Float16ViaF32.h"
#include "kernels/cpu/PlainLoops.h"

namespace graphc {
namespace {

using namespace plain;

/// Bool storage: one byte, read as `!= 0` whatever its value.
struct Bool8 {
  uint8_t v;
};

template <typename T> struct Wide { using type = T; };
template <> struct Wide<Bool8> { using type = int32_t; };
template <> struct Wide<Half> { using type = float; };
template <> struct Wide<BFloat> { using type = float; };

template <typename T> typename Wide<T>::type widen(T x) {
  if constexpr (isHalfLike<T>)
    return toFloat(x);
  else if constexpr (std::is_same_v<T, Bool8>)
    return x.v != 0;
  else
    return x;
}

template <typename To, typename From> To convert(From x) {
  auto w = widen(x);
  if constexpr (std::is_same_v<To, Bool8>)
    return Bool8{w != 0};
  else if constexpr (isHalfLike<To>)
    return fromFloat<To>((float)w);
  else
    return (To)w;
}

template <typename To, typename From> void castRange(To *o, const From *a, int64_t n) {
  // Mixed precision's casts: the vectorised conversions.
  if constexpr (std::is_same_v<To, BFloat> && std::is_same_v<From, float>)
    return floatsToBf16(o, a, n);
  if constexpr (std::is_same_v<To, float> && std::is_same_v<From, BFloat>)
    return bf16ToFloats(o, a, n);
  for (int64_t i = 0; i < n; ++i)
    o[i] = convert<To>(a[i]);
}

/// Calls f(TypeTag<T>{}) for any dtype's storage type.
template <typename F> void visitAny(DType t, F &&f) {
  switch (t) {
  case DType::Bool:
    return f(TypeTag<Bool8>{});
  case DType::I64:
    return f(TypeTag<int64_t>{});
  case DType::I32:
    return f(TypeTag<int32_t>{});
  default:
    return visitFloat(t, f);
  }
}

class CastKernel : public Kernel {
public:
  CastKernel(const Node &n, const KernelEnv &)
      : from_(n.operand(0)->type().dtype), to_(n.result()->type().dtype) {}

  llvm::Error run(KernelContext &ctx) override {
    int64_t n = ctx.outputs[0].numElements();
    if (from_ == to_) {
      if (ctx.outputs[0].data != ctx.inputs[0].data && n)
        std::memcpy(ctx.outputs[0].data, ctx.inputs[0].data, ctx.outputs[0].bytes());
      return llvm::Error::success();
    }
    visitAny(from_, [&](auto fromTag) {
      using From = typename decltype(fromTag)::type;
      visitAny(to_, [&](auto toTag) {
        using To = typename decltype(toTag)::type;
        To *o = ctx.outputs[0].as<To>();
        const From *a = ctx.inputs[0].as<const From>();
        parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
          castRange(o + begin, a + begin, end - begin);
        });
      });
    });
    return llvm::Error::success();
  }

  std::optional<unsigned> inPlaceOperand() const override {
    return from_ == to_ ? std::optional<unsigned>(0) : std::nullopt;
  }

private:
  DType from_, to_;
};

/// Converts one float tensor into another (Float16ViaF32's widening and rounding).
llvm::Error convertFloats(const TensorView &from, const TensorView &to, void *) {
  int64_t n = from.numElements();
  visitFloat(from.dtype, [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    visitFloat(to.dtype, [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
        castRange(to.as<To>() + begin, from.as<const From>() + begin, end - begin);
      });
    });
  });
  return llvm::Error::success();
}

} // namespace

void registerCpuCastKernels(KernelRegistry &r) {
  r.add(Op::Cast, DeviceKind::CPU,
        {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool},
        makeFactory<CastKernel>());
}

void registerCpuF16ViaF32Kernels(KernelRegistry &r) {
  registerFloat16ViaF32(r, DeviceKind::CPU, DType::F16,
                        {Op::Conv, Op::ConvGradData, Op::ConvGradFilter, Op::BatchNormTrain,
                         Op::BatchNormTrainGrad, Op::BatchNorm, Op::MaxPool, Op::MaxPoolGrad,
                         Op::AveragePool, Op::AveragePoolGrad, Op::GlobalAveragePool, Op::ReduceSum,
                         Op::ReduceMean},
                        convertFloats);
}

} // namespace graphc
