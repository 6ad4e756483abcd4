//===- LoopNest.h - Strided walks over plain tensors -------------*- C++ -*-===//
//
// An output walked in row-major order while each operand is read through its
// own strides (0 on a broadcast axis, negative for a reversed slice).
// Adjacent axes that every operand walks contiguously are merged, so a
// same-shape op is one flat run, a per-channel broadcast is runs of H*W
// against a scalar, and the odometer does no division inside a run.
//
// Index arithmetic only, no threads and no backend: the CPU's plain loops
// (kernels/cpu/PlainLoops.h) walk these nests, and the CUDA kernels hand
// them to the device as index tables.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "ir/Type.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace graphc {
namespace plain {

/// An output of shape `dims` walked in row-major order; operand k is read at
/// offset base[k] + sum(index[d] * strides[k][d]) (in elements).
struct LoopNest {
  Dims dims;
  llvm::SmallVector<Dims, 3> strides;
  llvm::SmallVector<int64_t, 3> base;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    return n;
  }
  /// Stride of operand k along the innermost axis.
  int64_t innerStride(unsigned k) const { return strides[k].back(); }

  /// Drops size-1 axes and merges neighbours that every operand walks as
  /// one; leaves at least one axis.
  void collapse();

  /// Calls f(outOffset, operandOffsets, length) for each innermost run of the
  /// flat output range [begin, end); operand k's run starts at
  /// operandOffsets[k] and steps by innerStride(k).
  template <typename F> void forEachRun(int64_t begin, int64_t end, F &&f) const {
    size_t rank = dims.size(), ops = strides.size();
    llvm::SmallVector<int64_t, 8> idx(rank);
    int64_t off[4];
    assert(ops <= 4 && "loop nests read at most four operands");
    int64_t rest = begin;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = rest % dims[d];
      rest /= dims[d];
    }
    for (size_t k = 0; k < ops; ++k) {
      off[k] = base[k];
      for (size_t d = 0; d < rank; ++d)
        off[k] += idx[d] * strides[k][d];
    }
    int64_t inner = dims[rank - 1];
    for (int64_t pos = begin; pos < end;) {
      int64_t len = std::min(inner - idx[rank - 1], end - pos);
      f(pos, (const int64_t *)off, len);
      pos += len;
      idx[rank - 1] += len;
      for (size_t k = 0; k < ops; ++k)
        off[k] += len * strides[k][rank - 1];
      for (size_t d = rank - 1; d > 0 && idx[d] == dims[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
        for (size_t k = 0; k < ops; ++k)
          off[k] += strides[k][d - 1] - dims[d] * strides[k][d];
      }
    }
  }
};

/// Row-major element strides of a shape.
Dims contiguousStrides(llvm::ArrayRef<int64_t> shape);

/// The nest that reads each operand broadcast (numpy rules) to `out`.
LoopNest broadcastNest(llvm::ArrayRef<int64_t> out, llvm::ArrayRef<Dims> operands);

/// Transpose, Slice or Expand as one strided read of operand 0 in the result's
/// order (the CPU kernel and the CUDA kernel's index share it).
LoopNest stridedCopyNest(const Node &n);

/// Product of dims[begin, end).
int64_t product(llvm::ArrayRef<int64_t> dims, size_t begin, size_t end);

} // namespace plain
} // namespace graphc
