//===- GemmDevice.h - Pointer arrays of a broadcast batched GEMM --*- C++ -*-===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

namespace graphc {
namespace cuda {

/// Writes batch b's matrix addresses: a + offset0(b), b + offset1(b), and
/// c + b * strideC, into `pointers` ([A..., B..., C...], batch each).
cudaError_t launchBatchPointers(const StridedIndex<2> &index, int64_t batch, const float *a,
                                const float *b, float *c, int64_t strideC, void **pointers,
                                cudaStream_t stream);

} // namespace cuda
} // namespace graphc
