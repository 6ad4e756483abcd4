//===- GemmPlan.h - MatMul and Gemm as cuBLAS calls --------------*- C++ -*-===//
//
// Host-side planning of the cuBLAS kernels, pure and tested on the host.
// Our tensors are row-major and cuBLAS is column-major, so C = op(A) op(B)
// is computed as C^T = op(B)^T op(A)^T: cuBLAS gets (B, A) with m and n
// swapped and each operand's leading dimension as stored.
//
// MatMul's batch dimensions broadcast (numpy). The plan picks, in order:
//  - one GEMM, when B is shared by every batch and A's batches are
//    consecutive (the batch folds into M);
//  - one strided-batched GEMM, when each operand's batches are equally
//    spaced (0 for a broadcast operand);
//  - one pointer-array batched GEMM otherwise, the arrays written on the
//    device by a small kernel from the batch index (GemmDevice.h).
// Every size cuBLAS sees must fit its int; planMatMul says so otherwise.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "kernels/cuda/DeviceCommon.h"

#include "llvm/Support/Error.h"

namespace graphc {
namespace cuda {

enum class GemmForm : uint8_t { Single, Strided, PointerArray };

struct GemmPlan {
  GemmForm form = GemmForm::Single;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool transA = false, transB = false;
  int64_t lda = 0, ldb = 0, ldc = 0;             ///< leading dimensions as stored (row-major)
  int64_t strideA = 0, strideB = 0, strideC = 0; ///< Strided: elements between batches
  StridedIndex<2> batchIndex; ///< PointerArray: batch -> element offsets of A and B
  float alpha = 1;
};

/// MatMul (a, b).
llvm::Expected<GemmPlan> planMatMul(const Node &n);
/// Gemm (A, B[, C]): the product part (alpha * op(A) op(B)); C is added
/// separately.
llvm::Expected<GemmPlan> planGemm(const Node &n);

/// Bytes of the pointer arrays a PointerArray plan needs (0 otherwise).
inline size_t pointerArrayBytes(const GemmPlan &p) {
  return p.form == GemmForm::PointerArray ? (size_t)p.batch * 3 * sizeof(void *) : 0;
}

} // namespace cuda
} // namespace graphc
