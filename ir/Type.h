//===- Type.h - Tensor types: dtype and static shape ------------*- C++ -*-===//
//
// A tensor type is an element type and a shape. Shapes are static except for
// one symbol, the batch dimension `N`, which the frontend may leave open and
// the compiler binds (bindBatch) before any pass that needs sizes. A symbolic
// dimension is stored as kBatchDim and printed as `N`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace graphc {

inline constexpr int64_t kBatchDim = -1;

using Dims = llvm::SmallVector<int64_t, 6>;

struct TensorType {
  DType dtype = DType::F32;
  Dims shape;

  TensorType() = default;
  TensorType(DType dt, llvm::ArrayRef<int64_t> dims) : dtype(dt), shape(dims.begin(), dims.end()) {}

  size_t rank() const { return shape.size(); }
  int64_t dim(int64_t i) const { return shape[i < 0 ? i + (int64_t)rank() : i]; }
  /// True when no dimension is the symbolic batch.
  bool isStatic() const;
  /// Element count; the batch symbol counts as `batch` (1 by default).
  int64_t numElements(int64_t batch = 1) const;
  int64_t bytes(int64_t batch = 1) const { return numElements(batch) * (int64_t)dtypeSize(dtype); }
  /// The type with every batch symbol replaced by `batch`.
  TensorType bound(int64_t batch) const;

  bool operator==(const TensorType &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

/// Bytes of `t` with the batch symbol counted as 1, computed with overflow
/// checks; nullopt when a dimension is negative (other than the batch
/// symbol) or the size exceeds kMaxTensorBytes (ir/MemoryLimit.h), or the process's
/// --memory-limit when that is lower (ir/MemoryLimit.h).
std::optional<int64_t> checkedBytes(const TensorType &t);
/// checkedBytes as an error: "<what> f32[...] is larger than the 1 TiB a
/// tensor may take" (or than the --memory-limit; or "has a negative
/// dimension").
llvm::Error checkTensorSize(const TensorType &t, const llvm::Twine &what);

/// "f32[N,3,299,299]"; a scalar is "f32[]".
std::string toString(const TensorType &t);
std::string shapeToString(llvm::ArrayRef<int64_t> dims);

} // namespace graphc
