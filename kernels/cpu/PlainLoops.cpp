//===- PlainLoops.cpp - Strided copies and 16-bit conversions -------------===//
//
// The out-of-line half of PlainLoops.h: the one strided copy that Transpose,
// Slice, Expand and friends share (runs of memcpy where the source is
// contiguous, square tiles where it is transposed).
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/PlainLoops.h"
#include "kernels/cpu/TargetClones.h"

namespace graphc {
namespace plain {

/// Side of the square tiles a transposing copy moves at a time.
constexpr int64_t kTile = 32;

/// A copy whose innermost output axis reads with a stride while axis `q`
/// reads contiguously (a transpose): tiles of q x last keep both the reads
/// and the writes within a few cache lines.
template <typename T> static void copyTiled(T *out, const T *in, const LoopNest &nest, size_t q) {
  size_t rank = nest.dims.size(), last = rank - 1;
  Dims outStrides = contiguousStrides(nest.dims);
  Dims outerDims, outerIn, outerOut;
  for (size_t d = 0; d < rank; ++d) {
    if (d == q || d == last)
      continue;
    outerDims.push_back(nest.dims[d]);
    outerIn.push_back(nest.strides[0][d]);
    outerOut.push_back(outStrides[d]);
  }
  int64_t nq = nest.dims[q], nl = nest.dims[last];
  int64_t qOut = outStrides[q], lIn = nest.strides[0][last];
  int64_t tilesQ = (nq + kTile - 1) / kTile, tilesL = (nl + kTile - 1) / kTile;
  int64_t tiles = tilesQ * tilesL;
  int64_t work = product(outerDims, 0, outerDims.size()) * tiles;
  parallelFor(work, std::max<int64_t>(1, kGrain / (kTile * kTile)),
              [&](int64_t begin, int64_t end) {
                for (int64_t w = begin; w < end; ++w) {
                  int64_t outer = w / tiles, tile = w % tiles;
                  const T *src = in + nest.base[0];
                  T *dst = out;
                  for (size_t d = outerDims.size(); d-- > 0;) {
                    int64_t i = outer % outerDims[d];
                    outer /= outerDims[d];
                    src += i * outerIn[d];
                    dst += i * outerOut[d];
                  }
                  int64_t q0 = (tile / tilesL) * kTile, l0 = (tile % tilesL) * kTile;
                  int64_t q1 = std::min(nq, q0 + kTile), l1 = std::min(nl, l0 + kTile);
                  for (int64_t i = q0; i < q1; ++i)
                    for (int64_t l = l0; l < l1; ++l)
                      dst[i * qOut + l] = src[i + l * lIn];
                }
              });
}

template <typename T> static void copyRuns(T *out, const T *in, const LoopNest &nest) {
  int64_t stride = nest.innerStride(0);
  if (stride != 0 && stride != 1) {
    for (size_t q = 0; q + 1 < nest.dims.size(); ++q)
      if (nest.strides[0][q] == 1)
        return copyTiled(out, in, nest, q);
  }
  parallelFor(nest.numElements(), kGrain, [&](int64_t begin, int64_t end) {
    nest.forEachRun(begin, end, [&](int64_t o, const int64_t *off, int64_t len) {
      const T *src = in + off[0];
      T *dst = out + o;
      if (stride == 1) {
        std::memcpy(dst, src, len * sizeof(T));
      } else if (stride == 0) {
        std::fill(dst, dst + len, *src);
      } else {
        for (int64_t i = 0; i < len; ++i)
          dst[i] = src[i * stride];
      }
    });
  });
}

void stridedCopy(void *out, const void *in, const LoopNest &nest, size_t elemSize) {
  if (nest.numElements() == 0)
    return;
  switch (elemSize) {
  case 1:
    return copyRuns(static_cast<uint8_t *>(out), static_cast<const uint8_t *>(in), nest);
  case 2:
    return copyRuns(static_cast<uint16_t *>(out), static_cast<const uint16_t *>(in), nest);
  case 4:
    return copyRuns(static_cast<uint32_t *>(out), static_cast<const uint32_t *>(in), nest);
  default:
    assert(elemSize == 8 && "unexpected element size");
    return copyRuns(static_cast<uint64_t *>(out), static_cast<const uint64_t *>(in), nest);
  }
}

GRAPHC_ISA_CLONES(void, bf16ToFloats, (float *to, const BFloat *from, int64_t n), (to, from, n)) {
  for (int64_t i = 0; i < n; ++i)
    to[i] = bf16BitsToFloat(from[i].bits);
}

GRAPHC_ISA_CLONES(void, floatsToBf16, (BFloat * to, const float *from, int64_t n), (to, from, n)) {
  for (int64_t i = 0; i < n; ++i)
    to[i].bits = floatToBf16Bits(from[i]);
}

GRAPHC_ISA_CLONES(void, addBf16, (float *acc, const BFloat *from, int64_t n), (acc, from, n)) {
  for (int64_t i = 0; i < n; ++i)
    acc[i] += bf16BitsToFloat(from[i].bits);
}

GRAPHC_ISA_CLONES(void, reluBf16, (BFloat * o, const BFloat *x, int64_t n), (o, x, n)) {
  // x < 0: sign set, not -0 (0x8000), not NaN (above -inf's 0xff80).
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b = x[i].bits;
    uint16_t keep = (b > 0x8000u && b <= 0xff80u) ? 0u : 0xffffu;
    o[i].bits = b & keep;
  }
}

GRAPHC_ISA_CLONES(void, reluGradBf16, (BFloat * o, const BFloat *y, const BFloat *dy, int64_t n),
                  (o, y, dy, n)) {
  // y > 0: as a signed 16-bit integer, 0 < y <= +inf's bits.
  for (int64_t i = 0; i < n; ++i) {
    int16_t b = (int16_t)y[i].bits;
    uint16_t keep = (b > 0 && b <= 0x7f80) ? 0xffffu : 0u;
    o[i].bits = dy[i].bits & keep;
  }
}

bool sameLayout(const KernelContext &ctx) {
  Layout l = ctx.outputs.empty() ? ctx.inputs[0].layout : ctx.outputs[0].layout;
  for (const TensorView &v : ctx.inputs)
    if (v.layout != l)
      return false;
  for (const TensorView &v : ctx.outputs)
    if (v.layout != l)
      return false;
  return true;
}

} // namespace plain
} // namespace graphc
