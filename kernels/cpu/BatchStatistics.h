//===- BatchStatistics.h - Per-channel batch mean and variance --*- C++ -*-===//
//
// The statistics a training-mode batch norm normalizes with, summed in double
// as PyTorch sums them on a CPU. oneDNN sums them in float32, in an order that
// depends on the layout and the ISA; over N·H·W terms (a hundred thousand in
// inception_v3) that rounding is amplified by every later layer, and it made
// our float32 training step two to four times further from float64 than
// PyTorch's (docs/reference-tests.md). Each channel is summed by one thread in
// a fixed order, so the result does not depend on the thread count.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"

namespace graphc {

/// Mean and biased variance over every axis but 1 of x ([N, C, ...] f32 or bf16,
/// plain, or 4-D blocked or channels-last), one float each per channel.
void batchStatistics(const TensorView &x, float *mean, float *var);

} // namespace graphc
