//===- Dispatch.cuh - Grid-stride loops and dtype dispatch for .cu files -*- C++ -*-===//
//
// Shared by the .cu files only: the grid-stride index of a thread, the
// launch-and-check shape every launcher has, and visitors that call a
// generic lambda with the storage type of an ElemType.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/ElementwiseDevice.h"

namespace graphc {
namespace cuda {

template <typename T> struct Tag { using type = T; };

/// The first index of this thread and the stride of a grid-stride loop.
__device__ inline int64_t gridStart() {
  return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ inline int64_t gridStride() {
  return (int64_t)gridDim.x * blockDim.x;
}

/// The error of the last launch (cudaSuccess when none was needed).
inline cudaError_t launched() {
  return cudaGetLastError();
}

template <typename F> cudaError_t visitFloatType(ElemType t, F &&f) {
  switch (t) {
  case ElemType::F32:
    return f(Tag<float>{});
  case ElemType::F16:
    return f(Tag<Half>{});
  case ElemType::BF16:
    return f(Tag<BFloat>{});
  default:
    return cudaErrorInvalidValue;
  }
}

template <typename F> cudaError_t visitNumericType(ElemType t, F &&f) {
  switch (t) {
  case ElemType::I64:
    return f(Tag<int64_t>{});
  case ElemType::I32:
    return f(Tag<int32_t>{});
  default:
    return visitFloatType(t, f);
  }
}

template <typename F> cudaError_t visitAnyType(ElemType t, F &&f) {
  if (t == ElemType::Bool)
    return f(Tag<Bool8>{});
  return visitNumericType(t, f);
}

} // namespace cuda
} // namespace graphc
