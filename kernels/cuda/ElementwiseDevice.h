//===- ElementwiseDevice.h - Elementwise ops: bodies and launchers -*- C++ -*-===//
//
// The per-element functions of the elementwise CUDA kernels (binary ops with
// broadcasting, activation gradients, unary ops, Cast, AddN, the comparisons,
// Not and Where), written once
// for the device and the host tests, and the launchers Elementwise.cu
// defines. The formulas are the CPU kernels' (kernels/cpu/Elementwise.cpp,
// Cast.cpp) in the same evaluation order: f16 and bf16 are computed in f32
// and rounded once; comparisons are written so NaN propagates as there.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

#include <cmath>

namespace graphc {
namespace cuda {

/// The dtypes, numbered as graphc::DType.
enum class ElemType : uint8_t { F32, F16, BF16, I64, I32, Bool };

enum class BinaryOp : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  ReluGrad,        ///< (y, dy)
  LeakyReluGrad,   ///< (x, dy)
  SigmoidGrad,     ///< (y, dy)
  TanhGrad,        ///< (y, dy)
  ClipGrad,        ///< (x, dy)
  ErfGrad,         ///< (x, dy)
  GeluGrad,        ///< (x, dy)
  HardSigmoidGrad, ///< (x, dy)
  HardSwishGrad,   ///< (x, dy)
  AddScaled,       ///< a + alpha * b (Gemm's beta * C)
};

enum class UnaryOp : uint8_t {
  Relu,
  LeakyRelu,
  Sigmoid,
  Tanh,
  Exp,
  Log,
  Sqrt,
  Neg,
  Clip,
  Erf,
  Gelu,
  HardSigmoid,
  HardSwish
};

struct ElemParams {
  float alpha = 0;      ///< LeakyRelu(Grad), HardSigmoid(Grad)
  float beta = 0;       ///< HardSigmoid(Grad)
  float lo = 0, hi = 0; ///< Clip(Grad)
  bool tanh = false;    ///< Gelu(Grad): the tanh approximation
};

// Erf's and Gelu's constants, as kernels/cpu/Elementwise.cpp rounds them.
inline constexpr float kTwoOverSqrtPi = 1.12837916709551257f;
inline constexpr float kSqrtHalf = 0.707106781186547524f;
inline constexpr float kInvSqrtTwoPi = 0.398942280401432678f;
inline constexpr float kSqrtTwoOverPi = 0.797884560802865356f;
inline constexpr float kGeluCubic = 0.044715f;

GRAPHC_HD float mathExp(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}
GRAPHC_HD float mathLog(float x) {
#if defined(__CUDA_ARCH__)
  return logf(x);
#else
  return std::log(x);
#endif
}
GRAPHC_HD float mathSqrt(float x) {
#if defined(__CUDA_ARCH__)
  return sqrtf(x);
#else
  return std::sqrt(x);
#endif
}
GRAPHC_HD float mathTanh(float x) {
#if defined(__CUDA_ARCH__)
  return tanhf(x);
#else
  return std::tanh(x);
#endif
}

GRAPHC_HD float mathErf(float x) {
#if defined(__CUDA_ARCH__)
  return erff(x);
#else
  return std::erf(x);
#endif
}

/// Gelu and its derivative times dy, PyTorch's formulas (both forms).
GRAPHC_HD float gelu(float x, bool tanhForm) {
  if (tanhForm)
    return 0.5f * x * (1.0f + mathTanh(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x)));
  return 0.5f * x * (1.0f + mathErf(x * kSqrtHalf));
}
GRAPHC_HD float geluGrad(float x, float dy, bool tanhForm) {
  if (tanhForm) {
    float t = mathTanh(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x));
    float inner = kSqrtTwoOverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * inner);
  }
  float cdf = 0.5f * (1.0f + mathErf(x * kSqrtHalf));
  float pdf = kInvSqrtTwoPi * mathExp(-0.5f * x * x);
  return dy * (cdf + x * pdf);
}

GRAPHC_HD float applyBinary(BinaryOp op, float a, float b, ElemParams p) {
  switch (op) {
  case BinaryOp::Add:
    return a + b;
  case BinaryOp::Sub:
    return a - b;
  case BinaryOp::Mul:
    return a * b;
  case BinaryOp::Div:
    return a / b;
  case BinaryOp::ReluGrad:
    return a > 0 ? b : 0.0f;
  case BinaryOp::LeakyReluGrad:
    return a > 0 ? b : p.alpha * b;
  case BinaryOp::SigmoidGrad:
    return b * a * (1 - a);
  case BinaryOp::TanhGrad:
    return b * (1 - a * a);
  case BinaryOp::ClipGrad:
    return a >= p.lo && a <= p.hi ? b : 0.0f;
  case BinaryOp::ErfGrad:
    return b * (kTwoOverSqrtPi * mathExp(-a * a));
  case BinaryOp::GeluGrad:
    return geluGrad(a, b, p.tanh);
  case BinaryOp::HardSigmoidGrad: {
    float t = p.alpha * a + p.beta;
    return t > 0 && t < 1 ? b * p.alpha : 0.0f;
  }
  case BinaryOp::HardSwishGrad:
    return a < -3.0f ? 0.0f : a >= 3.0f ? b : b * (a / 3.0f + 0.5f);
  case BinaryOp::AddScaled:
    return a + p.alpha * b;
  }
  return 0.0f;
}

/// Integer dtypes run Add, Sub and Mul (shape arithmetic).
template <typename T> GRAPHC_HD T applyBinaryInt(BinaryOp op, T a, T b) {
  switch (op) {
  case BinaryOp::Sub:
    return a - b;
  case BinaryOp::Mul:
    return a * b;
  default:
    return a + b;
  }
}

GRAPHC_HD float applyUnary(UnaryOp op, float x, ElemParams p) {
  switch (op) {
  case UnaryOp::Relu:
    return x < 0 ? 0.0f : x;
  case UnaryOp::LeakyRelu:
    return x < 0 ? p.alpha * x : x;
  case UnaryOp::Sigmoid:
    return 1.0f / (1.0f + mathExp(-x));
  case UnaryOp::Tanh:
    return mathTanh(x);
  case UnaryOp::Exp:
    return mathExp(x);
  case UnaryOp::Log:
    return mathLog(x);
  case UnaryOp::Sqrt:
    return mathSqrt(x);
  case UnaryOp::Neg:
    return -x;
  case UnaryOp::Clip: {
    // std::min(std::max(x, lo), hi), NaN included.
    float m = x < p.lo ? p.lo : x;
    return p.hi < m ? p.hi : m;
  }
  case UnaryOp::Erf:
    return mathErf(x);
  case UnaryOp::Gelu:
    return gelu(x, p.tanh);
  case UnaryOp::HardSigmoid: {
    // std::min(std::max(alpha * x + beta, 0), 1), as Clip.
    float t = p.alpha * x + p.beta;
    float m = t < 0.0f ? 0.0f : t;
    return 1.0f < m ? 1.0f : m;
  }
  case UnaryOp::HardSwish: {
    float t = x + 3.0f;
    float m = t < 0.0f ? 0.0f : t;
    return x * (6.0f < m ? 6.0f : m) / 6.0f;
  }
  }
  return 0.0f;
}

template <typename T> inline constexpr bool isHalfLike = false;
template <> inline constexpr bool isHalfLike<Half> = true;
template <> inline constexpr bool isHalfLike<BFloat> = true;
template <typename T> inline constexpr bool isFloatLike = isHalfLike<T>;
template <> inline constexpr bool isFloatLike<float> = true;

/// One element of a binary op on storage type T.
template <typename T> GRAPHC_HD T binaryElement(BinaryOp op, T a, T b, ElemParams p) {
  if constexpr (isFloatLike<T>)
    return fromFloat<T>(applyBinary(op, toFloat(a), toFloat(b), p));
  else
    return applyBinaryInt(op, a, b);
}

template <typename T> GRAPHC_HD T unaryElement(UnaryOp op, T x, ElemParams p) {
  if constexpr (isFloatLike<T>)
    return fromFloat<T>(applyUnary(op, toFloat(x), p));
  else
    return -x; // integers run Neg only
}

/// Cast: Tensor.to(dtype) semantics (kernels/cpu/Cast.cpp).
template <typename T> GRAPHC_HD auto widen(T x) {
  if constexpr (isHalfLike<T>)
    return toFloat(x);
  else if constexpr (sizeof(T) == 1)
    return (int32_t)(x.v != 0); // Bool8
  else
    return x;
}

template <typename To, typename From> GRAPHC_HD To convertElement(From x) {
  auto w = widen(x);
  if constexpr (sizeof(To) == 1)
    return To{(uint8_t)(w != 0)};
  else if constexpr (isHalfLike<To>)
    return fromFloat<To>((float)w);
  else
    return (To)w;
}

/// Equal, Less, Greater into bool (kernels/cpu/Select.cpp): f16 and bf16
/// compare in f32, integers as themselves.
enum class CompareOp : uint8_t { Equal, Less, Greater };

template <typename T> GRAPHC_HD Bool8 compareElement(CompareOp op, T a, T b) {
  auto x = widen(a), y = widen(b);
  bool r = op == CompareOp::Equal ? x == y : op == CompareOp::Less ? x < y : x > y;
  return Bool8{(uint8_t)r};
}

GRAPHC_HD Bool8 notElement(Bool8 x) {
  return Bool8{(uint8_t)(x.v == 0)};
}

/// Where: a where the condition is non-zero, else b.
template <typename T> GRAPHC_HD T whereElement(Bool8 c, T a, T b) {
  return c.v != 0 ? a : b;
}

/// AddN operands per launch; more are folded in by further launches.
inline constexpr int kMaxAddN = 32;
struct AddNOperands {
  const void *in[kMaxAddN];
  int count;
};

cudaError_t launchBinary(BinaryOp op, ElemType t, ElemParams p, const StridedIndex<2> &index,
                         int64_t n, void *out, const void *a, const void *b, cudaStream_t stream);
cudaError_t launchUnary(UnaryOp op, ElemType t, ElemParams p, int64_t n, void *out, const void *in,
                        cudaStream_t stream);
cudaError_t launchCast(ElemType from, ElemType to, int64_t n, void *out, const void *in,
                       cudaStream_t stream);
/// out (bool) = a op b, broadcast through `index`.
cudaError_t launchCompare(CompareOp op, ElemType t, const StridedIndex<2> &index, int64_t n,
                          void *out, const void *a, const void *b, cudaStream_t stream);
cudaError_t launchNot(int64_t n, void *out, const void *in, cudaStream_t stream);
/// out = cond ? a : b; `t` is a's and b's dtype, `index` reads (cond, a, b).
cudaError_t launchWhere(ElemType t, const StridedIndex<3> &index, int64_t n, void *out,
                        const void *cond, const void *a, const void *b, cudaStream_t stream);
/// out = sum of the operands, left to right (out may be operand 0).
cudaError_t launchAddN(ElemType t, int64_t n, void *out, const AddNOperands &ops,
                       cudaStream_t stream);

} // namespace cuda
} // namespace graphc
