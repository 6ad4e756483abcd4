//===- ShapeDevice.h - Data movement: bodies and launchers -------*- C++ -*-===//
//
// The element-level logic of the CUDA shape kernels, shared by the device
// code (Shape.cu) and the host tests: where a padded element reads from
// (constant, reflect, edge; the CPU's padSource), and which data element a
// gathered element copies. Launchers move elements of 1, 2, 4 or 8 bytes
// whatever their dtype.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cuda/DeviceCommon.h"

#include <cuda_runtime_api.h>

namespace graphc {
namespace cuda {

enum class PadMode : uint8_t { Constant, Reflect, Edge };

/// Where output index o along an axis of size n reads (-1: the fill value).
GRAPHC_HD int64_t padSource(int64_t o, int64_t before, int64_t n, PadMode mode) {
  int64_t i = o - before;
  if (n == 0 || mode == PadMode::Constant)
    return i >= 0 && i < n ? i : -1;
  if (mode == PadMode::Edge)
    return i < 0 ? 0 : i > n - 1 ? n - 1 : i;
  if (n == 1)
    return 0;
  int64_t period = 2 * (n - 1);
  i = ((i % period) + period) % period;
  return i < n ? i : period - i;
}

struct PadParams {
  int rank = 0;
  PadMode mode = PadMode::Constant;
  int64_t outDims[kMaxRank] = {};
  int64_t inDims[kMaxRank] = {};
  int64_t inStrides[kMaxRank] = {};
  int64_t before[kMaxRank] = {};
  uint64_t fill = 0; ///< the fill value's bytes
};

/// The input element output element `flat` copies, or -1 for the fill.
GRAPHC_HD int64_t padSourceOffset(const PadParams &p, int64_t flat) {
  int64_t offset = 0;
  bool inside = true;
  for (int d = p.rank - 1; d >= 0; --d) {
    int64_t o = flat % p.outDims[d];
    flat /= p.outDims[d];
    int64_t s = padSource(o, p.before[d], p.inDims[d], p.mode);
    inside = inside && s >= 0;
    offset += s * p.inStrides[d];
  }
  return inside ? offset : -1;
}

/// Gather along one axis: data [pre, dim, post], `count` indices.
struct GatherParams {
  int64_t pre = 1, dim = 0, post = 1, count = 0;
  bool wideIndices = true; ///< i64 (else i32)
  DeviceErrorWord *errors = nullptr;
  int32_t site = 0;
};

/// An index read and checked: its position along the axis, or -1 when it is
/// outside [-dim, dim).
GRAPHC_HD int64_t normalizeIndex(int64_t v, int64_t dim) {
  if (v < -dim || v >= dim)
    return -1;
  return v < 0 ? v + dim : v;
}

GRAPHC_HD int64_t readIndex(const void *indices, bool wide, int64_t j) {
  return wide ? static_cast<const int64_t *>(indices)[j]
              : (int64_t) static_cast<const int32_t *>(indices)[j];
}

/// For output element `e` of a gather: (index position j, data offset of
/// the element it copies, or -1 for a bad index).
GRAPHC_HD void gatherSource(const GatherParams &p, const void *indices, int64_t e, int64_t &j,
                            int64_t &from) {
  int64_t c = e % p.post, t = e / p.post;
  j = t % p.count;
  int64_t row = t / p.count;
  int64_t at = normalizeIndex(readIndex(indices, p.wideIndices, j), p.dim);
  from = at < 0 ? -1 : (row * p.dim + at) * p.post + c;
}

/// out[i] = in[index offset of i], elements of `elemSize` bytes.
cudaError_t launchStridedCopy(size_t elemSize, const StridedIndex<1> &index, int64_t n, void *out,
                              const void *in, cudaStream_t stream);
cudaError_t launchPad(size_t elemSize, const PadParams &p, int64_t n, void *out, const void *in,
                      cudaStream_t stream);
/// Bad indices are recorded (once per index position) and give zeros.
cudaError_t launchGather(size_t elemSize, const GatherParams &p, void *out, const void *data,
                         const void *indices, cudaStream_t stream);
/// dx (f32, [pre, dim, post]) must be zero; adds dy [pre, count, post] in
/// index order per column (deterministic). Bad indices are recorded and
/// skipped.
cudaError_t launchGatherGrad(const GatherParams &p, float *dx, const float *dy, const void *indices,
                             cudaStream_t stream);

} // namespace cuda
} // namespace graphc
