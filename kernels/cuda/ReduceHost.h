//===- ReduceHost.h - Seeing a reduction as kept x reduced axes --*- C++ -*-===//
//
// Host-side setup of the reduction engine (ReduceDevice.h): the axes of an
// input are merged into runs of kept and runs of reduced axes (size-1 axes
// dropped, neighbours of one kind joined), giving the two strided indices
// the engine walks. Pure; tested on the host.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Type.h"
#include "kernels/cuda/ReduceDevice.h"

#include "llvm/ADT/ArrayRef.h"

namespace graphc {
namespace cuda {

struct ReductionGeometry {
  Dims keptDims, keptStrides, reducedDims, reducedStrides; ///< outermost first
  bool innerReduced = false; ///< the innermost non-unit axis is reduced
  int64_t outputs = 1, count = 1;
  /// The engine's indices; false when either has more than kMaxRank runs.
  bool toIndices(StridedIndex<1> &kept, StridedIndex<1> &reduced) const;
};

/// `reduced[d]`: whether axis d of `shape` is summed over.
ReductionGeometry reductionGeometry(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<bool> reduced);

} // namespace cuda
} // namespace graphc
