//===- ElemTypeOf.h - Our CUDA kernels' name for a dtype --------*- C++ -*-===//
//
// The elementwise kernels (ElementwiseDevice.h) take an ElemType, which nvcc
// compiles without the IR; it mirrors DType value for value, so host code
// converts by this one function.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "kernels/cuda/ElementwiseDevice.h"

namespace graphc::cuda {

static_assert((int)ElemType::F32 == (int)DType::F32 && (int)ElemType::F16 == (int)DType::F16 &&
                  (int)ElemType::BF16 == (int)DType::BF16 &&
                  (int)ElemType::I64 == (int)DType::I64 && (int)ElemType::I32 == (int)DType::I32 &&
                  (int)ElemType::Bool == (int)DType::Bool,
              "ElemType mirrors DType");

inline ElemType elemType(DType t) {
  return (ElemType)t;
}

} // namespace graphc::cuda
