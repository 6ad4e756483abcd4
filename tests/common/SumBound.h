//===- SumBound.h - How far apart two groupings of the same sums may be -*- C++ -*-===//
//
// Two runs that sum the same terms in other groupings (towers against one
// device, workers against one process, one vector width against another,
// Winograd against direct, blocked against plain layouts, PyTorch against us)
// do not give the same bits, and no CPU's summation order is the right one.
// The bar is the arithmetic's: a K-term float32 sum is within γ_K ≈ K·u of
// its terms' magnitude whatever the order (Higham, "Accuracy and Stability of
// Numerical Algorithms", 4.2; u = 2^-24), so two orders are within about K·u
// of each other, measured against the tensor's largest value. K is the longest
// sum the step takes (longestSum in ir/Cost.h). Where values are stored in
// 16 bits between f32 sums (fp16, bf16), a stored value whose f32 input moved
// can round to the neighbouring 16-bit value, one ulp (2u of that format) per
// rounding on the path: 2·L·u16 more.
//
// That bar sits one to three orders of magnitude above what a different order
// does in practice and one to two below what a real fault does (a missing or
// doubled tower is off by 1/T, a wrong batch weight by percents). Tests whose
// two sides group every sum alike compare bits instead (sameBits).
//
// Every comparison prints its worst ratio to the bound ("[ bound    ] ..."), so
// a run under each ISA cap shows the margin each test has on that CPU
// (docs/other-cpus.md).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Attribute.h"
#include "ir/Tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace graphc::sumbound {

/// Unit roundoff of each storage format (round to nearest).
inline constexpr double kF32 = 0x1p-24, kF16 = 0x1p-11, kBf16 = 0x1p-8;

/// K·u_f32 for the longest sum, plus 2·u16 per 16-bit rounding on the path
/// whose input may differ (`u16` kF16 or kBf16, `roundings` L).
inline double bound(int64_t terms, double u16 = 0, int roundings = 0) {
  return (double)terms * kF32 + 2.0 * roundings * u16;
}

/// max|got - want| / max|want|: the error relative to the tensor's scale, so
/// entries near zero need no absolute agreement beyond it (0 for two zero
/// tensors, infinite for a NaN or another shape).
double relativeError(const Tensor &got, const Tensor &want);

/// relativeError(got, want) <= rel, naming the worst element otherwise.
testing::AssertionResult within(const Tensor &got, const Tensor &want, double rel);

/// The same bits (both sides group every sum alike).
testing::AssertionResult sameBits(const Tensor &got, const Tensor &want);

/// Prints "[ bound    ] what: worst W = R of the bound B" for the record.
void report(const std::string &what, double worst, double rel);

/// `t`'s values stored as `to` (rounded to nearest where `to` is narrower).
Tensor convertedTo(const Tensor &t, DType to);

/// The most windows of a pooling (kernel_shape, strides, dilations) that
/// cover one input element: how many shares its gradient adds up there, each
/// a rounding where the gradient is stored in 16 bits.
int windowsPerElement(const Attrs &pool);

} // namespace graphc::sumbound
